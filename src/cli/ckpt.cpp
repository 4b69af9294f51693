// zaya ckpt inspect DIR [--tensors]: step, layout, files and bytes, tensor groups.
// zaya ckpt verify DIR: every slice's checksum; names the file and tensor at fault.
// DIR: a checkpoint directory, a checkpoint root (follows `latest`) or a run directory.
#include <cstdio>
#include <map>
#include <memory>

#include "ckpt/checkpoint.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void inspect(const std::string& path, bool list_tensors) {
  zaya::Checkpoint ck(path);
  const auto& m = ck.manifest();
  std::printf("checkpoint  %s\n", ck.dir().c_str());
  std::printf("step        %lld (%s tokens)\n", (long long)ck.step(), m.contains("tokens") ? m["tokens"].dump().c_str() : "?");
  if (m.contains("layout")) std::printf("layout      %s\n", m["layout"].dump().c_str());
  if (m.contains("state") && m["state"].contains("optimizer"))
    std::printf("optimizer   %s, step %s\n", m["state"]["optimizer"].value("kind", "?").c_str(),
                m["state"]["optimizer"]["step"].dump().c_str());
  if (m.contains("state") && m["state"].contains("balancer"))
    std::printf("balancer    %s\n", m["state"]["balancer"].value("method", "?").c_str());
  const zaya::ModelConfig c = zaya::checkpoint_model_config(ck);
  std::printf("model       %s: D=%d V=%d L=%d E=%d%s top-%d, RoPE base %g\n", c.name.c_str(), c.hidden_size,
              c.vocab_size, c.num_layers, c.num_experts, c.use_mod ? "+skip" : "", c.topk, c.rope_theta);
  uint64_t total = 0;
  std::printf("files\n");
  if (m.contains("files"))
    for (auto& [name, bytes] : m["files"].items()) {
      std::printf("  %-32s %12s\n", name.c_str(), zaya::human_bytes(bytes.get<double>()).c_str());
      total += bytes.get<uint64_t>();
    }
  std::printf("  %-32s %12s\n", "total", zaya::human_bytes(double(total)).c_str());
  std::map<std::string, std::pair<size_t, size_t>> groups;  // prefix -> (tensors, elements)
  for (const auto& t : ck.tensors()) {
    auto& g = groups[t.name.substr(0, t.name.find('/'))];
    ++g.first;
    g.second += t.numel;
  }
  std::printf("tensor groups\n");
  for (auto& [name, g] : groups) std::printf("  %-20s %6zu tensors %14zu elements\n", name.c_str(), g.first, g.second);
  if (!list_tensors) return;
  std::printf("tensors\n");
  for (const auto& t : ck.tensors()) {
    std::printf("  %-72s %-5s %-16s", t.name.c_str(), zaya::dtype_name(t.dtype), shape_str(t.shape).c_str());
    for (const auto& s : t.slices) std::printf(" %s[%zu+%zu]", s.file.c_str(), s.start, s.numel);
    std::printf("\n");
  }
}

void verify(const std::string& path) {
  zaya::Checkpoint ck(path);
  ck.verify();
  size_t slices = 0;
  for (const auto& t : ck.tensors()) slices += t.slices.size();
  std::printf("OK %s: %zu tensors, %zu slices, every checksum matches\n", ck.dir().c_str(), ck.tensors().size(), slices);
}

}  // namespace

ZAYA_COMMAND("ckpt", "Inspect and verify training checkpoints", [](CLI::App& app) {
  app.require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto list = std::make_shared<bool>(false);
  auto* ins = app.add_subcommand("inspect", "step, layout, files, tensor groups (and every tensor with --tensors)");
  ins->add_option("dir", *dir, "checkpoint directory, checkpoint root or run directory")->required();
  ins->add_flag("--tensors", *list, "list every tensor with its shape and slices");
  ins->callback([=] { inspect(*dir, *list); });
  auto* ver = app.add_subcommand("verify", "check every checksum; names the file and tensor at fault");
  ver->add_option("dir", *dir, "checkpoint directory, checkpoint root or run directory")->required();
  ver->callback([=] { verify(*dir); });
});
