#include "cli/train_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace zaya::cli {
namespace {

std::string human_seconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = long(s + 0.5);
  if (t >= 3600) return cat(t / 3600, "h", (t % 3600) / 60, "m");
  if (t >= 60) return cat(t / 60, "m", t % 60, "s");
  return cat(t, "s");
}

std::string human_rate(double r) {
  char buf[32];
  if (r >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  else if (r >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", r);
  return buf;
}

void log_start(const StartRecord& r) {
  switch (r.kind) {
    case StartRecord::Kind::FreshStart:
      log_info("resume: no checkpoint under ", r.from, "; starting from scratch");
      break;
    case StartRecord::Kind::Resumed: {
      const comm::Layout& L = r.layout;
      const bool same = r.saved_dp == L.dp && r.saved_ep == L.ep && r.saved_cp == L.cp;
      log_info("resumed from ", r.from, " at step ", r.step, " (", r.tokens, " tokens)",
               same ? "" : cat("; resharded from dp ", r.saved_dp, " x ep ", r.saved_ep, " x cp ", r.saved_cp,
                               " to dp ", L.dp, " x ep ", L.ep, " x cp ", L.cp));
      break;
    }
    case StartRecord::Kind::InitFrom:
      log_info("init-from ", r.from, ": weights", r.with_biases ? " and balancing biases" : "",
               " loaded; optimizer, balancer and data loader state start fresh");
      break;
  }
}

// The progress line's ETA needs the run's extent and a smoothed token rate over every step.
struct ProgressState {
  int64_t log_interval = 1;
  int64_t total_steps = 0, stop_step = 0;
  uint64_t total_tokens = 0;
  double ema_tps = 0;  // smoothed tokens/s
};

void print_run_start(const RunStartRecord& r) {
  const comm::Layout& L = r.layout;
  std::printf("run %s: %lld steps, %.3g tokens, %d phase(s), %s, %s, %zu parameters%s; world %d = dp %d x ep %d x "
              "cp %d%s; from step %lld\n",
              r.name.c_str(), (long long)r.total_steps, double(r.total_tokens), r.num_phases,
              optimizer_kind_name(r.optimizer), r.bf16 ? "bf16" : "fp32", r.params, L.ep > 1 ? " on this rank" : "",
              r.world, L.dp, L.ep, L.cp, L.dp > 1 ? (r.zero1 ? ", ZeRO-1" : ", replicated optimizer") : "",
              (long long)r.from_step);
}

void print_step(ProgressState& st, const StepRecord& r) {
  st.ema_tps = st.ema_tps > 0 ? 0.9 * st.ema_tps + 0.1 * r.tokens_per_second : r.tokens_per_second;
  if (!(r.step % st.log_interval == 0 || r.step == st.stop_step || r.step == 1)) return;
  const double remaining = double(st.total_tokens > r.tokens ? st.total_tokens - r.tokens : 0);
  const double eta = st.stop_step < st.total_steps ? double(st.stop_step - r.step) * r.seconds
                                                   : remaining / std::max(st.ema_tps, 1e-9);
  const LayerLoad& w = r.worst_load;
  std::printf("step %lld/%lld  loss %.4f  lr %.2e  gnorm %.3f%s  %s tok/s  ETA %s  load max %.2fx min %.2fx H %.3f "
              "skip %.1f%%%s\n",
              (long long)r.step, (long long)st.stop_step, r.loss, r.lr, r.grad_norm, r.clipped ? "*" : "",
              human_rate(r.tokens_per_second).c_str(), human_seconds(eta).c_str(), w.max_rel, w.min_rel, w.entropy,
              100 * w.skip_rate, r.skipped ? "  SKIPPED" : "");
  std::fflush(stdout);
}

}  // namespace

void install_train_progress(TrainerReports& report, int64_t log_interval, bool quiet) {
  report.start = log_start;
  if (quiet) return;
  auto st = std::make_shared<ProgressState>();
  st->log_interval = log_interval;
  report.run_start = [st](const RunStartRecord& r) {
    st->total_steps = r.total_steps;
    st->stop_step = r.stop_step;
    st->total_tokens = r.total_tokens;
    print_run_start(r);
  };
  report.phase = [](const PhaseRecord& p) {
    if (p.first) return;
    std::printf("phase %d (%s) from step %lld: seq_len %d, rope_theta %g, global batch %d\n", p.phase + 1,
                p.name.c_str(), (long long)p.from_step, p.seq_len, p.rope_theta, p.global_batch);
  };
  report.step = [st](const StepRecord& r) { print_step(*st, r); };
  report.eval = [](const EvalRecord& e) {
    if (e.tokens <= 0) return;
    std::printf("eval  step %lld  val loss %.4f  ppl %.2f  (%lld tokens)\n", (long long)e.step, e.loss,
                std::exp(e.loss), (long long)e.tokens);
  };
  report.checkpoint = [](const CheckpointRecord& c) {
    std::printf("saved %s (training stalled %.3f s; written in %.2f s%s)\n", c.dir.c_str(), c.stall_s, c.write_s,
                c.async ? " in the background" : "");
  };
}

void print_train_tasks(int64_t step, const std::vector<eval::TaskResult>& results) {
  std::printf("eval tasks at step %lld\n%s", (long long)step, eval::markdown_table(results).c_str());
  std::fflush(stdout);
}

}  // namespace zaya::cli
