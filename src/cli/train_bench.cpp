// zaya train-bench: training-step throughput of a model config on random tokens
// (forward + backward + optimizer step), with the share of time in GEMMs and peak memory.
// bench/train_step.sh runs it beside the PyTorch peer; zaya size validates against it.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "train/optim.h"

namespace {

struct Opts {
  std::string config, precision = "fp32", optimizer = "adamw";
  int batch = 8, seq = 256, steps = 10, warmup = 2;
  bool json = false, profile = false;
  std::string profile_clock = "wall";
};

void run(const Opts& o) {
  zaya::ModelConfig cfg = zaya::load_model_config(o.config);
  if (o.profile_clock != "wall" && o.profile_clock != "thread")
    zaya::fail("--profile-clock: expected wall or thread, got '", o.profile_clock, "'");
  zaya::prof::set_clock(o.profile_clock == "thread" ? zaya::prof::Clock::ThreadCpu : zaya::prof::Clock::Wall);
  if (o.precision == "bf16") {
    if (!zaya::bf16_gemm_supported()) zaya::log_warn("no bf16 GEMM on this CPU: running fp32");
    zaya::gemm_settings().precision = zaya::GemmPrecision::BF16;
  } else if (o.precision != "fp32") {
    zaya::fail("--precision: expected fp32 or bf16, got '", o.precision, "'");
  }
  zaya::Model<float> m(cfg);
  m.init(1234);
  zaya::OptimizerSettings os;
  os.kind = o.optimizer == "muon" ? zaya::OptimizerKind::Muon : zaya::OptimizerKind::AdamW;
  if (o.optimizer != "muon" && o.optimizer != "adamw") zaya::fail("--optimizer: expected adamw or muon");
  zaya::Optimizer opt(m.layout.params, os);
  const int N = o.batch * o.seq;
  std::vector<int32_t> ids(size_t(N) + 1);
  zaya::Philox rng(1, 2);
  std::vector<double> step_s, fwd_s, bwd_s, opt_s, gemm_s;
  double loss = 0;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    for (auto& v : ids) v = int32_t(rng.below(cfg.vocab_size));
    zaya::gemm_stats() = {};
    zaya::gemm_stats_enable(true);
    if (o.profile && s == o.warmup) zaya::prof::reset();
    zaya::prof::enable(o.profile && s >= o.warmup);
    zaya::Timer t;
    zaya::ForwardResult r;
    {
      ZAYA_PROFILE("forward");
      r = m.forward(ids.data(), ids.data() + 1, o.batch, o.seq);
    }
    double t_f = t.seconds();
    {
      ZAYA_PROFILE("backward");
      m.zero_grads();
      m.backward();
    }
    double t_b = t.seconds();
    zaya::gemm_stats_enable(false);
    {
      ZAYA_PROFILE("optimizer");
      zaya::bf16* p16 = m.bf16_weights();  // bf16 GEMMs: the weights' copy, written in the same pass
      opt.step(m.params.data(), m.grads.data(), 1e-4, 1.0, p16);
      if (p16) m.mark_bf16_weights_current();
    }
    double t_o = t.seconds();
    zaya::prof::enable(false);
    loss = r.loss;
    if (s < o.warmup) continue;
    step_s.push_back(t_o);
    fwd_s.push_back(t_f);
    bwd_s.push_back(t_b - t_f);
    opt_s.push_back(t_o - t_b);
    gemm_s.push_back(zaya::gemm_stats().seconds);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double st = median(step_s);
  const double gemm_frac = median(gemm_s) / st;
  const size_t rss = zaya::peak_rss_bytes();
  if (o.json) {
    nlohmann::json prof = nlohmann::json::array();
    for (const auto& row : zaya::prof::report())
      prof.push_back({{"zone", row.path}, {"ms", row.seconds * 1e3 / o.steps},
                      {"gemm_ms", row.gemm_seconds * 1e3 / o.steps}, {"gemm_gflop", row.gemm_flops * 1e-9 / o.steps},
                      {"calls", double(row.calls) / o.steps}});
    nlohmann::json j = {{"config", cfg.name},      {"batch", o.batch},          {"seq", o.seq},
                        {"precision", o.precision}, {"threads", omp_get_max_threads()},
                        {"step_time_s", st},        {"tokens_per_s", N / st},    {"forward_s", median(fwd_s)},
                        {"backward_s", median(bwd_s)}, {"optimizer_s", median(opt_s)}, {"gemm_fraction", gemm_frac},
                        {"peak_rss_bytes", rss},    {"loss", loss}};
    if (o.profile) j["profile"] = prof;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s\n", zaya::gemm_runtime_info().c_str());
  if (o.profile) std::printf("%s", zaya::prof::format_table(zaya::prof::report(), o.steps).c_str());
  std::printf("%s B=%d T=%d %s %s: step %.1f ms (fwd %.1f, bwd %.1f, opt %.1f), %.0f tokens/s, GEMM %.0f%% of step, "
              "peak RSS %s, loss %.4f\n",
              cfg.name.c_str(), o.batch, o.seq, o.precision.c_str(), o.optimizer.c_str(), st * 1e3,
              median(fwd_s) * 1e3, median(bwd_s) * 1e3, median(opt_s) * 1e3, N / st, 100 * gemm_frac,
              zaya::human_bytes(double(rss)).c_str(), loss);
}

}  // namespace

ZAYA_COMMAND("train-bench", "Training-step throughput on random tokens (forward + backward + optimizer)",
             [](CLI::App& app) {
               auto o = std::make_shared<Opts>();
               app.add_option("--config", o->config, "model config")->required();
               app.add_option("--batch", o->batch, "micro-batch size")->check(CLI::PositiveNumber);
               app.add_option("--seq", o->seq, "sequence length")->check(CLI::PositiveNumber);
               app.add_option("--steps", o->steps, "timed steps")->check(CLI::PositiveNumber);
               app.add_option("--warmup", o->warmup, "untimed warm-up steps");
               app.add_option("--precision", o->precision, "fp32 or bf16");
               app.add_option("--optimizer", o->optimizer, "adamw or muon");
               app.add_flag("--json", o->json, "print JSON");
               app.add_flag("--profile", o->profile,
                            "time named zones (forward/backward/optimizer, per layer type and op kind) and print "
                            "where a step goes: GEMM versus the rest");
               app.add_option("--profile-clock", o->profile_clock,
                              "wall (default), or thread: the main thread's CPU time, which leaves out waits "
                              "for a core (with OMP_NUM_THREADS=1, a measure of the work on a loaded machine)");
               app.callback([o] { run(*o); });
             });
