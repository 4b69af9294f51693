// zaya ckpt inspect DIR [--tensors]: step, layout, files (bytes, slices), tensor groups; or an HF dir.
// zaya ckpt verify DIR: every slice's checksum; names the file and tensor at fault (HF dir: tensors and shapes).
// zaya ckpt export-hf CKPT OUT [--dtype bf16|fp32] [--max-shard-size 5GB] [--force]: an HF directory.
// zaya ckpt import-hf HFDIR OUT [--force]: a weights-only zaya checkpoint (train with --init-from).
// zaya ckpt diff A B [--tol X] [--rtol X] [--nan-equal]: per-tensor max abs / rel difference (checkpoints or
// HF dirs); a NaN or infinity on either side is a difference (inf) unless --nan-equal.
// DIR, CKPT, A, B: a step directory (or its manifest.json), a checkpoint root or its `latest`
// pointer file (followed), or a run directory (RUN/ckpt/latest).
// Other files add subcommands through cli/ckpt_subcommands.h.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_convert.h"
#include "cli/ckpt_subcommands.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// An HF directory: config summary, files with bytes and tensor counts, dtypes.
void inspect_hf(const std::string& path, bool list_tensors) {
  const zaya::ModelConfig c = zaya::load_model_config(path);
  zaya::HfDir hf(path);
  std::printf("hf directory %s\n", path.c_str());
  std::printf("model       D=%d V=%d L=%d E=%d%s top-%d, RoPE base %g\n", c.hidden_size, c.vocab_size, c.num_layers,
              c.num_experts, c.use_mod ? "+skip" : "", c.topk, c.rope_theta);
  std::printf("files\n");
  uint64_t total = 0;
  std::map<std::string, size_t> dtypes;
  std::vector<const zaya::SafetensorsFile*> files;
  for (const auto& f : hf.files()) files.push_back(f.get());
  std::sort(files.begin(), files.end(), [](auto* a, auto* b) { return a->path() < b->path(); });
  for (const auto* f : files) {
    const uint64_t bytes = std::filesystem::file_size(f->path());
    total += bytes;
    std::printf("  %-32s %12s %6zu tensors\n", std::filesystem::path(f->path()).filename().c_str(),
                zaya::human_bytes(double(bytes)).c_str(), f->tensors().size());
    for (const auto& e : f->tensors()) ++dtypes[zaya::dtype_name(e.dtype)];
  }
  std::printf("  %-32s %12s %6zu tensors\n", "total", zaya::human_bytes(double(total)).c_str(), hf.names().size());
  std::printf("dtypes     ");
  for (auto& [d, n] : dtypes) std::printf(" %s: %zu", d.c_str(), n);
  std::printf("\n");
  for (const char* f : {"tokenizer.model", "tokenizer.json", "generation_config.json"})
    std::printf("%-24s %s\n", f, std::filesystem::exists(std::filesystem::path(path) / f) ? "yes" : "no");
  if (!list_tensors) return;
  std::printf("tensors\n");
  for (const std::string& n : hf.names()) {
    const auto* e = hf.find(n);
    std::printf("  %-72s %-5s %-16s %s\n", n.c_str(), zaya::dtype_name(e->e->dtype), shape_str(e->e->shape).c_str(),
                std::filesystem::path(e->file->path()).filename().c_str());
  }
}

void inspect(const std::string& path, bool list_tensors) {
  if (zaya::is_hf_dir(path)) return inspect_hf(path, list_tensors);
  zaya::Checkpoint ck(path);
  const auto& m = ck.manifest();
  std::printf("checkpoint  %s\n", ck.dir().c_str());
  std::printf("step        %lld (%s tokens)\n", (long long)ck.step(), m.contains("tokens") ? m["tokens"].dump().c_str() : "?");
  if (m.contains("layout")) std::printf("layout      %s\n", m["layout"].dump().c_str());
  if (m.contains("state") && m["state"].contains("optimizer"))
    std::printf("optimizer   %s, step %s\n", m["state"]["optimizer"].value("kind", "?").c_str(),
                m["state"]["optimizer"].value("step", nlohmann::json("?")).dump().c_str());
  if (m.contains("state") && m["state"].contains("balancer"))
    std::printf("balancer    %s\n", m["state"]["balancer"].value("method", "?").c_str());
  const zaya::ModelConfig c = zaya::checkpoint_model_config(ck);
  std::printf("model       %s: D=%d V=%d L=%d E=%d%s top-%d, RoPE base %g\n", c.name.c_str(), c.hidden_size,
              c.vocab_size, c.num_layers, c.num_experts, c.use_mod ? "+skip" : "", c.topk, c.rope_theta);
  uint64_t total = 0;
  std::map<std::string, size_t> slices_in;  // file -> slices it holds
  size_t slices = 0;
  for (const auto& t : ck.tensors())
    for (const auto& s : t.slices) ++slices_in[s.file], ++slices;
  std::printf("files\n");
  if (m.contains("files"))
    for (auto& [name, bytes] : m["files"].items()) {
      std::printf("  %-32s %12s %6zu slices\n", name.c_str(), zaya::human_bytes(bytes.get<double>()).c_str(),
                  slices_in[name]);
      total += bytes.get<uint64_t>();
    }
  std::printf("  %-32s %12s %6zu slices\n", "total", zaya::human_bytes(double(total)).c_str(), slices);
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
  if (zaya::is_hf_dir(path)) {  // no checksums in the HF format: check it loads
    const size_t n = zaya::verify_hf_dir(path);
    std::printf("OK %s: %zu tensors, every one config.json needs present with its shape (HF: no checksums)\n",
                path.c_str(), n);
    return;
  }
  zaya::Checkpoint ck(path);
  ck.verify();
  size_t slices = 0;
  for (const auto& t : ck.tensors()) slices += t.slices.size();
  std::printf("OK %s: %zu tensors, %zu slices, every checksum matches\n", ck.dir().c_str(), ck.tensors().size(), slices);
}

void export_hf(const std::string& ckpt, const std::string& out, const std::string& dtype, const std::string& shard,
               bool force, bool no_check) {
  zaya::ExportHfOptions o;
  if (dtype == "bf16" || dtype == "bfloat16") o.dtype = zaya::DType::BF16;
  else if (dtype == "fp32" || dtype == "f32" || dtype == "float32") o.dtype = zaya::DType::F32;
  else zaya::fail("--dtype: '", dtype, "' is not bf16 or fp32");
  o.max_shard_bytes = zaya::parse_shard_size(shard);
  o.force = force;
  o.check_hf_compat = !no_check;
  const zaya::ConvertSummary s = zaya::export_hf(ckpt, out, o);
  std::printf("exported step %lld to %s: %zu tensors (%s) in %zu file%s, %s%s\n", (long long)s.step, s.out.c_str(),
              s.tensors, zaya::dtype_name(o.dtype), s.files, s.files == 1 ? "" : "s",
              zaya::human_bytes(double(s.bytes)).c_str(), s.tokenizer ? ", tokenizer.model" : ", no tokenizer");
}

void import_hf(const std::string& hf, const std::string& out, bool force) {
  const zaya::ConvertSummary s = zaya::import_hf(hf, out, force);
  std::printf("imported %s to %s: %zu tensors in %zu files, %s%s\n", hf.c_str(), s.out.c_str(), s.tensors, s.files,
              zaya::human_bytes(double(s.bytes)).c_str(), s.tokenizer ? ", tokenizer.model" : ", no tokenizer");
  zaya::log_info("weights only: the optimizer, balancer and data loader start fresh; train from it with "
                 "zaya train --init-from ", s.out);
}

void diff(const std::string& a, const std::string& b, double tol, double rtol, bool nan_equal) {
  const zaya::DiffResult r = zaya::diff_weights(a, b, nan_equal);
  size_t compared = 0, differ = 0, missing = 0, over = 0, nonfinite = 0;
  double max_abs = 0, max_rel = 0;
  std::string worst;
  std::printf("%-72s %-12s %-10s %12s %12s\n", "tensor", "shape", "dtypes", "max_abs", "max_rel");
  for (const auto& t : r.tensors) {
    const std::string dt = t.dtype_a + "/" + t.dtype_b;
    if (!t.status.empty()) {
      ++missing;
      std::printf("%-72s %-12s %-10s %s%s%s\n", t.name.c_str(), shape_str(t.shape_a.empty() ? t.shape_b : t.shape_a).c_str(),
                  dt.c_str(), t.status.c_str(), t.status == "shape differs" ? ": " : "",
                  t.status == "shape differs" ? (shape_str(t.shape_a) + " vs " + shape_str(t.shape_b)).c_str() : "");
      continue;
    }
    ++compared;
    if (t.max_abs > 0 || t.max_rel > 0) ++differ;
    if ((tol >= 0 && t.max_abs > tol) || (rtol >= 0 && t.max_rel > rtol)) ++over;
    if (t.max_abs >= max_abs) max_abs = t.max_abs, worst = t.name;
    max_rel = std::max(max_rel, t.max_rel);  // diff_weights made a NaN element inf
    std::printf("%-72s %-12s %-10s %12.4g %12.4g", t.name.c_str(), shape_str(t.shape_a).c_str(), dt.c_str(), t.max_abs,
                t.max_rel);
    if (t.nonfinite_a || t.nonfinite_b) {
      ++nonfinite;
      std::printf("  NaN/inf: %zu in A, %zu in B", t.nonfinite_a, t.nonfinite_b);
    }
    std::printf("\n");
  }
  std::printf("%zu tensors compared, %zu differ, %zu unmatched (only in one or shape differs)", compared, differ, missing);
  if (r.skipped_a || r.skipped_b)
    std::printf(", %zu non-weight tensors of the checkpoint skipped", r.skipped_a + r.skipped_b);
  if (nonfinite) std::printf(", %zu hold NaN or infinite values", nonfinite);
  std::printf("; max abs %.4g%s%s, max rel %.4g\n", max_abs, worst.empty() ? "" : " in ", worst.c_str(), max_rel);
  const bool checking = tol >= 0 || rtol >= 0;
  if (checking && (over || missing))
    zaya::fail("diff: ", over, " tensors exceed ", tol >= 0 ? zaya::cat("--tol ", tol) : "",
               tol >= 0 && rtol >= 0 ? " / " : "", rtol >= 0 ? zaya::cat("--rtol ", rtol) : "", ", ", missing,
               " unmatched", nonfinite ? zaya::cat(", ", nonfinite, " hold NaN or infinite values") : "");
}

}  // namespace

namespace zaya::cli {
std::vector<CkptSubcommand>& ckpt_subcommands() {
  static std::vector<CkptSubcommand> r;
  return r;
}
}  // namespace zaya::cli

namespace {

constexpr const char* kCkptHelp = "checkpoint: step directory, checkpoint root, its `latest` file or run directory";

void setup_ckpt(CLI::App& app) {
  app.require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto list = std::make_shared<bool>(false);
  auto* ins = app.add_subcommand("inspect", "step, layout, files, tensor groups (and every tensor with --tensors)");
  ins->add_option("dir", *dir, kCkptHelp)->required();
  ins->add_flag("--tensors", *list, "list every tensor with its shape and slices");
  ins->callback([=] { inspect(*dir, *list); });
  auto* ver = app.add_subcommand("verify", "check every checksum; names the file and tensor at fault");
  ver->add_option("dir", *dir, kCkptHelp)->required();
  ver->callback([=] { verify(*dir); });
  auto src = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("bf16"), shard = std::make_shared<std::string>("5GB");
  auto force = std::make_shared<bool>(false), no_check = std::make_shared<bool>(false);
  auto* exp = app.add_subcommand("export-hf", "write an HF-format directory (config.json, safetensors, tokenizer)");
  exp->add_option("ckpt", *src, kCkptHelp)->required();
  exp->add_option("out", *out, "destination directory (must be absent or empty unless --force)")->required();
  exp->add_option("--dtype", *dtype, "bf16 or fp32 (balancing biases stay fp32)")->capture_default_str();
  exp->add_option("--max-shard-size", *shard, "largest safetensors file, e.g. 5GB, 500MB, none")->capture_default_str();
  exp->add_flag("--force", *force, "replace a non-empty destination");
  exp->add_flag("--no-hf-check", *no_check, "export configs the released HF ZAYA code cannot load");
  exp->callback([=] { export_hf(*src, *out, *dtype, *shard, *force, *no_check); });
  auto* imp = app.add_subcommand("import-hf", "an HF directory as a weights-only zaya checkpoint (for --init-from)");
  imp->add_option("hfdir", *src, "HF-format directory (config.json + safetensors)")->required();
  imp->add_option("out", *out, "destination checkpoint directory (absent or empty unless --force)")->required();
  imp->add_flag("--force", *force, "replace a non-empty destination");
  imp->callback([=] { import_hf(*src, *out, *force); });
  auto b = std::make_shared<std::string>();
  auto tol = std::make_shared<double>(-1), rtol = std::make_shared<double>(-1);
  auto nan_equal = std::make_shared<bool>(false);
  auto* dif = app.add_subcommand("diff", "per-tensor max abs / rel difference of two checkpoints or HF dirs");
  dif->add_option("a", *src, "checkpoint (step dir, root, `latest` file or run dir) or HF directory")->required();
  dif->add_option("b", *b, "checkpoint (step dir, root, `latest` file or run dir) or HF directory")->required();
  dif->add_option("--tol", *tol, "exit non-zero when a tensor's max abs difference exceeds this (or one is unmatched)");
  dif->add_option("--rtol", *rtol, "exit non-zero when a tensor's max rel difference exceeds this (or one is unmatched)");
  dif->add_flag("--nan-equal", *nan_equal,
                "count NaN against NaN (and an infinity against the same one) as equal; by default any NaN or "
                "infinity is a difference");
  dif->callback([=] { diff(*src, *b, *tol, *rtol, *nan_equal); });
  // Subcommands other files register (ckpt_subcommands.h), in name order.
  auto& extra = zaya::cli::ckpt_subcommands();
  std::sort(extra.begin(), extra.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : extra) c.setup(*app.add_subcommand(c.name, c.help));
}

}  // namespace

ZAYA_COMMAND("ckpt", "Inspect, verify, compare and convert checkpoints (zaya and HF)", setup_ckpt);
