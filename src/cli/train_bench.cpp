// zaya train-bench: training-step throughput of a model config on random tokens
// (forward + backward + optimizer step), with the share of time in GEMMs and peak memory
// (measured by bench/train_step.h). bench/train_step.sh runs it beside the PyTorch peer.
#include <omp.h>

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/train_step.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "core/profile.h"
#include "kernels/gemm.h"
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
  if (o.precision != "fp32" && o.precision != "bf16")
    zaya::fail("--precision: expected fp32 or bf16, got '", o.precision, "'");
  zaya::bench::TrainStepOptions so;
  so.batch = o.batch;
  so.seq = o.seq;
  so.steps = o.steps;
  so.warmup = o.warmup;
  so.bf16 = o.precision == "bf16";
  so.optimizer.kind = zaya::parse_optimizer_kind(o.optimizer, "--optimizer");
  so.profile = o.profile;
  so.profile_clock = o.profile_clock == "thread" ? zaya::prof::Clock::ThreadCpu : zaya::prof::Clock::Wall;
  const zaya::bench::TrainStepResult r = zaya::bench::measure_train_step(cfg, so);
  const int N = o.batch * o.seq;
  const double st = r.step_s;
  if (o.json) {
    nlohmann::json prof = nlohmann::json::array();
    for (const auto& row : r.profile)
      prof.push_back({{"zone", row.path}, {"ms", row.seconds * 1e3 / o.steps},
                      {"gemm_ms", row.gemm_seconds * 1e3 / o.steps}, {"gemm_gflop", row.gemm_flops * 1e-9 / o.steps},
                      {"calls", double(row.calls) / o.steps}});
    nlohmann::json j = {{"config", cfg.name},      {"batch", o.batch},          {"seq", o.seq},
                        {"precision", o.precision}, {"threads", omp_get_max_threads()},
                        {"step_time_s", st},        {"tokens_per_s", N / st},    {"forward_s", r.forward_s},
                        {"backward_s", r.backward_s}, {"optimizer_s", r.optimizer_s}, {"gemm_fraction", r.gemm_fraction},
                        {"peak_rss_bytes", r.peak_rss_bytes}, {"loss", r.loss},
                        {"skip_share", r.skip_share}};
    if (o.profile) j["profile"] = prof;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s\n", zaya::gemm_runtime_info().c_str());
  if (o.profile) std::printf("%s", zaya::prof::format_table(r.profile, o.steps).c_str());
  std::printf("%s B=%d T=%d %s %s: step %.1f ms (fwd %.1f, bwd %.1f, opt %.1f), %.0f tokens/s, GEMM %.0f%% of step, "
              "peak RSS %s, loss %.4f\n",
              cfg.name.c_str(), o.batch, o.seq, o.precision.c_str(), o.optimizer.c_str(), st * 1e3,
              r.forward_s * 1e3, r.backward_s * 1e3, r.optimizer_s * 1e3, N / st, 100 * r.gemm_fraction,
              zaya::human_bytes(double(r.peak_rss_bytes)).c_str(), r.loss);
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
