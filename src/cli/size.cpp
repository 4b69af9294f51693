// zaya size: hardware-aware sizing. Modes:
//   zaya size --config MODEL --hw PROFILE [layout flags]          the calculators and predicted step
//   zaya size --config MODEL --hw PROFILE --check                 co-design rule checks
//   zaya size --search --total P --active Q --hw PROFILE          shape search, Pareto front
//   zaya size --moe-widths --config MODEL --hw PROFILE [--plot F] MoE width trade-off table (+ PNG)
//   zaya size --profile-from DIR [--network FILE] [--write-profile F]  a measured profile
//   zaya size --config MODEL --gemm-shapes [layout flags]         GEMM shapes to measure for a profile
//   zaya size --config MODEL --kernel-shapes [layout flags]       the step's kernels, for zaya bench kernels
//   zaya size --measure-elementwise DIR                            exp / erf rates of this machine
// PROFILE is a TOML file (configs/hardware/*.toml); --profile-from DIR builds one from `zaya
// bench` outputs instead, and --network FILE replaces the network part with nccl-tests /
// rccl-tests output. Every mode takes --json.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "model/config.h"
#include "size/elementwise.h"
#include "size/hardware.h"
#include "size/measured.h"
#include "size/moe_widths.h"
#include "size/report.h"
#include "size/rules.h"
#include "size/search.h"
#include "size/zones.h"

namespace {
namespace zs = zaya::size;

struct SizeArgs {
  std::string config, hw, profile_from, network, write_profile, plot, measure_elementwise;
  bool json = false, check = false, search = false, moe_widths = false, gemm_shapes = false, kernel_shapes = false;
  // Layout.
  int dp = 1, ep = 1, cp = 1, micro_batch = 1, seq = 0, grad_accum = 1;
  std::string dtype = "bf16", optimizer = "adamw", attention = "flash";
  bool recompute = false;
  int grad_bytes = 0;  // 0: the dtype's default
  double skip_share = 0, overlap = 0;
  // Outputs.
  int devices = 1024, context = 0;
  double tokens = 12e12;
  std::vector<int> decode_batches = {1, 8, 64, 256};
  // Search.
  double total = 0, active = 0, tolerance = 0.10;
  int top = 15, decode_batch = 1;
  // MoE widths.
  std::vector<int> experts = {4, 8, 16, 32, 64, 128};
  std::vector<int> topks = {1, 2, 4};
};

zs::HardwareProfile load_profile(const SizeArgs& a) {
  if (!a.hw.empty() && !a.profile_from.empty()) zaya::fail("give either --hw or --profile-from, not both");
  if (a.hw.empty() && a.profile_from.empty()) zaya::fail("missing --hw PROFILE.toml (or --profile-from DIR)");
  zs::HardwareProfile hw = a.hw.empty() ? zs::profile_from_bench_dir(a.profile_from) : zs::load_hardware_profile(a.hw);
  if (!a.network.empty()) zs::apply_nccl_tests_file(hw, a.network);
  return hw;
}

zs::RunLayout layout(const SizeArgs& a, const zaya::ModelConfig& cfg) {
  zs::RunLayout r = zs::RunLayout::for_dtype(a.dtype);
  r.dp = a.dp;
  r.ep = a.ep;
  r.cp = a.cp;
  r.micro_batch = a.micro_batch;
  r.seq = a.seq > 0 ? a.seq : cfg.max_position_embeddings;
  r.grad_accum = a.grad_accum;
  r.recompute = a.recompute;
  r.skip_share = a.skip_share;
  r.optimizer = a.optimizer;
  r.overlap = a.overlap;
  if (a.grad_bytes) {
    if (a.grad_bytes != 2 && a.grad_bytes != 4) zaya::fail("--grad-bytes must be 2 or 4, got ", a.grad_bytes);
    r.grad_bytes = a.grad_bytes;
  }
  r.attention = a.attention;
  r.validate(cfg);
  return r;
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

std::string python() {
  if (const char* p = std::getenv("ZAYA_PYTHON")) return p;
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

void plot_moe_widths(const nlohmann::json& j, const std::string& png) {
  std::string tmp = png + ".json";
  {
    std::ofstream f(tmp);
    if (!f) zaya::fail(tmp, ": cannot write the plot data");
    f << j.dump(1);
  }
  // The script's own messages go to stderr: stdout may be carrying --json.
  std::string cmd = python() + " '" ZAYA_SOURCE_DIR "/scripts/plot_size.py' '" + tmp + "' '" + png + "' 1>&2";
  int rc = std::system(cmd.c_str());
  std::filesystem::remove(tmp);
  if (rc != 0) zaya::fail("--plot: scripts/plot_size.py failed (exit ", rc, "); it needs python3 with matplotlib");
}

void run(const SizeArgs& a) {
  const int modes = int(a.check) + int(a.search) + int(a.moe_widths) + int(a.gemm_shapes) + int(a.kernel_shapes);
  if (modes > 1)
    zaya::fail("--check, --search, --moe-widths, --gemm-shapes and --kernel-shapes are separate modes; give one");
  if (!a.measure_elementwise.empty()) {  // needs no profile or config
    zs::ElementwiseRates r = zs::measure_elementwise_rates();
    std::string path = (std::filesystem::path(a.measure_elementwise) / "elementwise.json").string();
    zs::write_elementwise_json(r, path);
    if (a.json) print_json(zs::elementwise_to_json(r));
    else std::printf("exp(float) %.4g/s, erf(float) %.4g/s, parallel region %.3g us, elementwise kernels %.4g GB/s "
                     "on %d threads; wrote %s\n",
                     r.exp_f32_per_s, r.erf_f32_per_s, r.parallel_region_us, r.kernels_GBps, r.threads, path.c_str());
    for (const std::string& n : r.flagged)
      std::fprintf(stderr, "zaya size: warning: %s's rounds disagree by more than 2x (a busy machine?)\n", n.c_str());
    return;
  }
  if (a.kernel_shapes) {  // needs no profile
    if (a.config.empty()) zaya::fail("--kernel-shapes needs --config MODEL.toml");
    zaya::ModelConfig cfg = zaya::load_model_config(a.config);
    for (const std::string& line : zs::zone_kernel_shapes(zs::build_workload(cfg, layout(a, cfg))))
      std::printf("%s\n", line.c_str());
    return;
  }
  if (a.gemm_shapes) {  // needs no profile
    if (a.config.empty()) zaya::fail("--gemm-shapes needs --config MODEL.toml");
    zaya::ModelConfig cfg = zaya::load_model_config(a.config);
    auto shapes = zs::step_gemm_shapes(zs::build_workload(cfg, layout(a, cfg)));
    nlohmann::json j = nlohmann::json::array();
    for (auto& g : shapes) {
      if (a.json) j.push_back({{"M", g.M}, {"N", g.N}, {"K", g.K}});
      else std::printf("%.0f %.0f %.0f\n", g.M, g.N, g.K);
    }
    if (a.json) print_json(j);
    return;
  }
  zs::HardwareProfile hw = load_profile(a);
  if (!a.write_profile.empty()) {
    std::ofstream f(a.write_profile);
    if (!f) zaya::fail(a.write_profile, ": cannot write the profile");
    f << zs::hardware_profile_to_toml(hw);
  }
  if (a.search) {
    std::string ref_path = a.config.empty() ? std::string(ZAYA_SOURCE_DIR "/configs/zaya1-base.toml") : a.config;
    zaya::ModelConfig ref = zaya::load_model_config(ref_path);
    zs::SearchTargets t;
    t.total = a.total;
    t.active = a.active;
    t.tolerance = a.tolerance;
    t.decode_batch = a.decode_batch;
    t.context = a.context > 0 ? a.context : ref.max_position_embeddings;
    zs::RunLayout r = layout(a, ref);
    zs::SearchResult s = zs::search_shapes(ref, ref, zs::SearchSpace{}, t, r, hw);
    if (a.json) {
      nlohmann::json j = zs::search_to_json(s, size_t(a.top));
      j["targets"] = {{"total", t.total}, {"active", t.active}, {"tolerance", t.tolerance},
                      {"decode_batch", t.decode_batch}, {"context", t.context}};
      j["hardware"] = hw.name;
      print_json(j);
    } else {
      std::printf("%s", zs::search_to_text(s, t, hw, size_t(a.top)).c_str());
    }
    return;
  }
  if (a.config.empty()) {
    if (!a.profile_from.empty() || !a.network.empty()) {  // profile only
      if (a.json) print_json(zs::hardware_profile_to_json(hw));
      else std::printf("%s", zs::profile_to_text(hw).c_str());
      return;
    }
    zaya::fail("missing --config MODEL.toml");
  }
  zaya::ModelConfig cfg = zaya::load_model_config(a.config);
  zs::RunLayout r = layout(a, cfg);
  const int context = a.context > 0 ? a.context : r.seq;
  if (a.check) {
    auto rules = zs::check_rules(cfg, r, hw);
    if (a.json) print_json({{"model", cfg.name}, {"hardware", hw.name}, {"rules", zs::rules_to_json(rules)}});
    else std::printf("%s", zs::rules_to_text(cfg, hw, rules).c_str());
    return;
  }
  if (a.moe_widths) {
    zs::MoeWidthTable t = zs::moe_width_table(cfg, r, hw, a.experts, a.topks, a.decode_batches, context);
    nlohmann::json j = zs::moe_widths_to_json(t);
    j["model"] = cfg.name;
    j["hardware"] = hw.name;
    if (!a.plot.empty()) plot_moe_widths(j, a.plot);
    if (a.json) print_json(j);
    else std::printf("%s%s", zs::moe_widths_to_text(cfg, hw, t).c_str(),
                     a.plot.empty() ? "" : ("plot: " + a.plot + "\n").c_str());
    return;
  }
  zs::SizeReport rep = zs::size_report(a.config, cfg, r, hw, a.devices, a.tokens, a.decode_batches, context);
  if (a.json) print_json(zs::report_to_json(rep));
  else std::printf("%s", zs::report_to_text(rep).c_str());
}

}  // namespace

ZAYA_COMMAND("size", "Hardware-aware sizing: parameters, FLOPs, memory, KV cache, predicted step time, rule checks, "
                     "shape search, MoE width trade-off",
             [](CLI::App& app) {
  auto a = std::make_shared<SizeArgs>();
  app.add_option("--config", a->config, "model config (TOML, HF config.json or directory)");
  app.add_option("--hw", a->hw, "hardware profile TOML (configs/hardware/*.toml)");
  app.add_option("--profile-from", a->profile_from, "build the profile from a directory of `zaya bench` outputs");
  app.add_option("--network", a->network, "nccl-tests / rccl-tests text output: the profile's network part");
  app.add_option("--write-profile", a->write_profile, "write the profile used as TOML");
  app.add_flag("--json", a->json, "print JSON");
  app.add_flag("--check", a->check, "co-design rule checks (pass / warn with the fix)");
  app.add_flag("--search", a->search, "search shapes near --total / --active and print the Pareto front");
  app.add_flag("--moe-widths", a->moe_widths, "MoE width trade-off table at fixed expert parameters");
  app.add_flag("--kernel-shapes", a->kernel_shapes,
               "list the kernels (GEMM layouts, attention, conv) a training step of --config runs, as `zaya bench "
               "kernels --shapes` reads them");
  app.add_flag("--gemm-shapes", a->gemm_shapes, "list the GEMM shapes (M N K) a training step of --config runs");
  app.add_option("--measure-elementwise", a->measure_elementwise,
                 "measure exp / erf rates on this machine into DIR/elementwise.json (for --profile-from DIR)");
  app.add_option("--dp", a->dp, "data-parallel ranks")->capture_default_str();
  app.add_option("--ep", a->ep, "expert-parallel ranks (inside dp*cp)")->capture_default_str();
  app.add_option("--cp", a->cp, "context-parallel ranks")->capture_default_str();
  app.add_option("--micro-batch", a->micro_batch, "sequences per micro-batch per rank")->capture_default_str();
  app.add_option("--seq", a->seq, "sequence length (default: the config's max_position_embeddings)");
  app.add_option("--grad-accum", a->grad_accum, "micro-batches per optimizer step")->capture_default_str();
  app.add_option("--dtype", a->dtype, "compute dtype: bf16 or fp32")->capture_default_str();
  app.add_flag("--recompute", a->recompute, "full activation recompute");
  app.add_option("--grad-bytes", a->grad_bytes, "bytes per gradient element (2 or 4; default 4)");
  app.add_option("--skip-share", a->skip_share, "fraction of routing choices taking the skip class")->capture_default_str();
  app.add_option("--optimizer", a->optimizer, "adamw or muon")->capture_default_str();
  app.add_option("--attention", a->attention, "flash (fused, causal-skipping), full (zaya CPU kernel: whole square in scratch, backward recomputes), naive (scores stored)")
      ->capture_default_str();
  app.add_option("--overlap", a->overlap, "fraction of ZeRO-1 communication hidden behind compute")->capture_default_str();
  app.add_option("--devices", a->devices, "devices K for the days-to-train figure")->capture_default_str();
  app.add_option("--tokens", a->tokens, "token budget for the days-to-train figure")->capture_default_str();
  app.add_option("--context", a->context, "context length for KV cache bytes and decode (default: --seq)");
  app.add_option("--decode-batches", a->decode_batches, "decode batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--total", a->total, "--search: total parameters without embedding");
  app.add_option("--active", a->active, "--search: active parameters without embedding");
  app.add_option("--tolerance", a->tolerance, "--search: relative window around the targets")->capture_default_str();
  app.add_option("--top", a->top, "--search: rows to print")->capture_default_str();
  app.add_option("--decode-batch", a->decode_batch, "--search: decode batch for the latency axis")->capture_default_str();
  app.add_option("--experts", a->experts, "--moe-widths: expert counts")->delimiter(',')->capture_default_str();
  app.add_option("--topk", a->topks, "--moe-widths: top-k values")->delimiter(',')->capture_default_str();
  app.add_option("--plot", a->plot, "--moe-widths: write a PNG plot (scripts/plot_size.py)");
  app.callback([a] { run(*a); });
});
