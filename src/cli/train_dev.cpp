// zaya optim-case (hidden; behind tests/optim_reference.sh): a few optimizer steps on a
// real model's gradients, written for the PyTorch reference (tools/reference/optim_ref.py).
//
//   OUT/case.safetensors  p0.<name> (initial params), g<t>.<name> (the gradient used at step t,
//                         t = 1..S), final.<name> (zaya's params after S steps)
//   OUT/case.json         optimizer settings, per-step learning rates, and per tensor
//                         whether it is updated by Muon and whether it decays
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/io.h"
#include "core/rng.h"
#include "model/model.h"
#include "train/optim.h"

namespace {
namespace fs = std::filesystem;

struct CaseArgs {
  std::string config, out, optimizer = "adamw";
  int steps = 3, batch = 2, seq = 16;
  uint64_t seed = 5;
  double lr = 1e-2, weight_decay = 0.1;
};

void optim_case(const CaseArgs& a) {
  zaya::ModelConfig cfg = zaya::load_model_config(a.config);
  zaya::Model<float> m(cfg);
  m.init(a.seed);
  zaya::OptimizerSettings s;
  s.kind = zaya::parse_optimizer_kind(a.optimizer, "--optimizer");
  s.adamw.weight_decay = a.weight_decay;
  zaya::Optimizer opt(m.layout.params, s);
  // One fixed random batch; the gradients change with the weights from step to step.
  zaya::Philox rng(a.seed, zaya::hash_name("optim-case.tokens"));
  const int N = a.batch * a.seq;
  std::vector<int32_t> in(static_cast<size_t>(N)), tg(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) in[size_t(i)] = int32_t(rng.below(uint64_t(cfg.vocab_size)));
  for (int i = 0; i < N; ++i) tg[size_t(i)] = int32_t(rng.below(uint64_t(cfg.vocab_size)));

  const auto& P = m.layout.params.params;
  zaya::SafetensorsWriter w;  // keeps pointers to F32 data: every array below outlives write()
  const std::vector<float> p0 = m.params;
  for (const auto& p : P) w.add_float("p0." + p.name, zaya::DType::F32, p.shape, p0.data() + p.offset);
  std::vector<std::vector<float>> grads(size_t(a.steps));
  nlohmann::json lrs = nlohmann::json::array();
  for (int t = 1; t <= a.steps; ++t) {
    m.zero_grads();
    m.forward(in.data(), tg.data(), a.batch, a.seq);
    m.backward(1.f);
    grads[size_t(t - 1)] = m.grads;
    const double lr = a.lr * (1.0 + 0.25 * (t - 1));  // varies, as a schedule would
    lrs.push_back(lr);
    opt.step(m.params.data(), m.grads.data(), lr);
  }
  for (int t = 1; t <= a.steps; ++t)
    for (const auto& p : P)
      w.add_float(zaya::cat("g", t, ".", p.name), zaya::DType::F32, p.shape, grads[size_t(t - 1)].data() + p.offset);
  for (const auto& p : P) w.add_float("final." + p.name, zaya::DType::F32, p.shape, m.params.data() + p.offset);
  fs::create_directories(a.out);
  w.write((fs::path(a.out) / "case.safetensors").string());

  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& p : P) tensors.push_back({{"name", p.name}, {"muon", opt.uses_muon(p)}, {"decay", opt.decays(p)}});
  nlohmann::json j = {{"optimizer", a.optimizer},
                      {"steps", a.steps},
                      {"lr", lrs},
                      {"adamw", opt.state()["adamw"]},
                      {"muon", opt.state()["muon"]},
                      {"tensors", tensors}};
  const std::string text = j.dump(1) + "\n";
  zaya::write_file_atomic((fs::path(a.out) / "case.json").string(), text.data(), text.size());
  std::printf("optim-case: %s, %d steps, %zu tensors -> %s\n", a.optimizer.c_str(), a.steps, P.size(), a.out.c_str());
}

}  // namespace

ZAYA_COMMAND("optim-case", "Optimizer steps for the PyTorch reference (developer tool)", [](CLI::App& app) {
  app.group("");  // hidden from --help
  auto a = std::make_shared<CaseArgs>();
  app.add_option("--config", a->config, "model config")->required();
  app.add_option("--out", a->out, "output directory")->required();
  app.add_option("--optimizer", a->optimizer, "adamw or muon")->check(CLI::IsMember(zaya::optimizer_kind_names()));
  app.add_option("--steps", a->steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--seed", a->seed, "seed");
  app.add_option("--lr", a->lr, "learning rate of step 1");
  app.add_option("--weight-decay", a->weight_decay, "weight decay");
  app.callback([a] { optim_case(*a); });
});
