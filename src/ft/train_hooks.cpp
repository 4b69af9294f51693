#include "ft/train_hooks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "ft/diagnose.h"
#include "ft/heartbeat.h"
#include "ft/inject.h"

namespace zaya::ft {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

void append_line(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  ssize_t w = ::write(fd, line.data(), line.size());
  (void)w;
  ::close(fd);
}

// Everything the hooks share, kept alive by the hooks themselves.
// Run-queue wait of this thread since `from` (a thread_runqueue_wait_s() reading); 0 where
// the kernel does not report it.
double waited_since(double from) {
  const double now = thread_runqueue_wait_s();
  return from >= 0 && now >= from ? now - from : 0.0;
}

struct Runtime {
  int rank = 0;
  std::string out_dir;
  std::unique_ptr<HeartbeatWriter> hb;
  std::unique_ptr<FaultInjector> inject;
  std::unique_ptr<AnomalyDetector> detector;
  Clock::time_point step_t0;
  double wait_step0 = -1, wait_t0 = -1;  // the thread's run-queue wait at the step's start, at step_t0
  double unit_s = 0;          // the last forward/backward, the unit of a slow injection's delay
  double last_compute_s = 0;  // the last step less its time in communication and in run-queue waits
  MedianWindow window{8};     // the last steps' compute times, for straggler detection
  bool counted_clock = false; // --compute-clock counted
  bool seeded = false;

  // The accepted steps before `step` as the trainer logged them (full precision, trimmed to
  // the resume point by the trainer), into the detector's windows.
  void seed_from_metrics(int64_t step) {
    std::ifstream in(fs::path(out_dir) / "metrics.jsonl");
    std::string line;
    std::vector<std::pair<double, double>> accepted;
    while (std::getline(in, line)) {
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || j.value("type", "") != "step" || j.value("skipped", false)) continue;
      if (!j.contains("step") || j["step"].get<int64_t>() >= step) continue;
      if (!j.contains("loss") || !j["loss"].is_number() || !j.contains("grad_norm") || !j["grad_norm"].is_number())
        continue;
      accepted.push_back({j["loss"].get<double>(), j["grad_norm"].get<double>()});
    }
    for (const auto& [l, g] : accepted) detector->seed(l, g);
  }

  void judged(const StepCheck& c, const AnomalyDecision& d) {
    if (rank != 0) return;
    const char* what = d.verdict == StepVerdict::Abort ? "aborting the run"
                       : d.verdict == StepVerdict::Skip ? "update skipped"
                                                        : "warning only";
    std::fprintf(stderr, "anomaly: step %lld: %s (loss %g, grad norm %g%s), %d in a row, %lld in all: %s\n",
                 (long long)c.step, d.kind.c_str(), c.loss, c.grad_norm,
                 d.z != 0 ? cat(", z ", d.z).c_str() : "", d.consecutive, (long long)detector->anomalies(), what);
    json j = {{"step", c.step}, {"kind", d.kind}, {"loss", std::isfinite(c.loss) ? json(c.loss) : json(nullptr)},
              {"grad_norm", std::isfinite(c.grad_norm) ? json(c.grad_norm) : json(nullptr)},
              {"z", d.z}, {"consecutive", d.consecutive},
              {"verdict", d.verdict == StepVerdict::Abort  ? "abort"
                          : d.verdict == StepVerdict::Skip ? "skip"
                                                           : "warn"}};
    if (c.router)
      j["router"] = {{"layer", c.router->layer}, {"since", c.router->first_step}, {"steps", c.router->steps},
                     {"entropy", std::isfinite(c.router->entropy) ? json(c.router->entropy) : json(nullptr)},
                     {"skip", std::isfinite(c.router->skip) ? json(c.router->skip) : json(nullptr)}};
    append_line((fs::path(out_dir) / kAnomaliesFile).string(), j.dump() + "\n");
    if (d.verdict == StepVerdict::Abort) {
      const std::string text = json{{"first", d.first_step}, {"last", c.step}, {"kind", d.kind}}.dump() + "\n";
      write_file_atomic((fs::path(out_dir) / kAbortFile).string(), text.data(), text.size());
    }
  }
};

}  // namespace

void add_train_flags(CLI::App& app, FtTrainOptions& o) {
  app.add_option("--inject", o.inject,
                 "fault injection, repeatable: kill:rank=R,step=S[,at=checkpoint[,nth=K]] | hang:rank=R,step=S[,at=checkpoint] | nan:step=S | "
                 "spike:step=S[,factor=F] | corrupt-ckpt[:step=S] | enospc:step=S[,nth=K] | slow:rank=R,factor=F | "
                 "stop:rank=R,step=S[,at=checkpoint] (also ZAYA_INJECT)");
  app.add_option("--skip-steps", o.skip_steps,
                 "data windows A:B (1-based, inclusive) whose batches are drawn but not trained on; repeatable");
  app.add_option("--anomaly-zscore", o.anomaly_z,
                 "skip a step whose loss or gradient norm is this many standard deviations above the rolling "
                 "window of accepted steps, once it is full (0: off)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--anomaly-loss-zscore", o.loss_z, "loss spike threshold (default: --anomaly-zscore)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--anomaly-gnorm-zscore", o.grad_norm_z, "gradient-norm spike threshold (default: --anomaly-zscore)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--anomaly-window", o.window, "steps in the rolling window")->capture_default_str()->check(CLI::Range(2, 100000));
  app.add_option("--anomaly-max-consecutive", o.max_consecutive,
                 "this many anomalous steps in a row end the run with exit code 17 (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heartbeat-dir", o.heartbeat_dir, "write per-rank heartbeats here (zaya launch sets it)");
  app.add_option("--straggler-window", o.straggler_window,
                 "steps over which each heartbeat reports the median compute time (zaya launch judges "
                 "stragglers on it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--compute-clock", o.compute_clock,
                 "what a heartbeat's compute time is: wall (measured) or counted (the step's tokens x 1 us, "
                 "times an injected slow factor: straggler verdicts that follow from the injection alone)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wall", "counted"}));
}

std::pair<int64_t, int64_t> parse_skip_window(const std::string& s) {
  const size_t colon = s.find(':');
  auto num = [&](const std::string& v) {
    size_t used = 0;
    long long x = -1;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZAYA_CHECK(!v.empty() && used == v.size() && x >= 1, "--skip-steps ", s, ": \"", v, "\" is not a step >= 1");
    return int64_t(x);
  };
  const int64_t a = num(s.substr(0, colon)), b = colon == std::string::npos ? a : num(s.substr(colon + 1));
  ZAYA_CHECK(a <= b, "--skip-steps ", s, ": the window ends before it starts");
  return {a, b};
}

int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

void install(const FtTrainOptions& o, TrainerOptions& opt, TrainerHooks& hooks, const std::string& out_dir, int rank) {
  for (const std::string& s : o.skip_steps) {
    std::string rest = s;  // also "A:B,C:D"
    size_t at = 0;
    while (at <= rest.size()) {
      const size_t comma = rest.find(',', at);
      const std::string piece = rest.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (!piece.empty()) opt.skip_steps.push_back(parse_skip_window(piece));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  std::string spec_list;
  for (const std::string& s : o.inject) spec_list += s + ";";
  if (const char* env = std::getenv("ZAYA_INJECT")) spec_list += env;
  std::vector<FaultSpec> specs = parse_faults(spec_list);

  auto rt = std::make_shared<Runtime>();
  rt->rank = rank;
  rt->out_dir = out_dir;
  ZAYA_CHECK(o.straggler_window >= 1, "--straggler-window ", o.straggler_window, " is not >= 1");
  rt->window = MedianWindow(o.straggler_window);
  ZAYA_CHECK(o.compute_clock == "wall" || o.compute_clock == "counted", "--compute-clock ", o.compute_clock,
             " is not wall or counted");
  rt->counted_clock = o.compute_clock == "counted";
  // out_dir is created by the Trainer once its inputs have been read: a run that fails on
  // bad input leaves nothing behind.
  std::error_code ec;
  if (rank == 0 && !opt.resume) {
    fs::remove(fs::path(out_dir) / kAnomaliesFile, ec);
    fs::remove(fs::path(out_dir) / kAbortFile, ec);
  }
  std::string hb_dir = o.heartbeat_dir;
  if (hb_dir.empty())
    if (const char* env = std::getenv("ZAYA_HEARTBEAT_DIR")) hb_dir = env;
  if (!hb_dir.empty()) rt->hb = std::make_unique<HeartbeatWriter>(hb_dir, rank);
  if (!specs.empty())
    rt->inject = std::make_unique<FaultInjector>(std::move(specs), rank, (fs::path(out_dir) / kFaultsFile).string(),
                                                 opt.resume);
  AnomalyOptions ao;
  ao.loss_z = o.loss_z >= 0 ? o.loss_z : o.anomaly_z;
  ao.grad_norm_z = o.grad_norm_z >= 0 ? o.grad_norm_z : o.anomaly_z;
  ao.window = o.window;
  ao.min_history = o.window;  // a full window: a few steps after a restart are no baseline
  ao.max_consecutive = o.max_consecutive;
  rt->detector = std::make_unique<AnomalyDetector>(ao);

  auto prev_hb = hooks.heartbeat;
  hooks.heartbeat = [rt, prev_hb](const char* stage, int64_t step, double step_s) {
    if (prev_hb) prev_hb(stage, step, step_s);
    // Written before the injector acts, so a hang at a checkpoint shows the checkpoint stage.
    if (rt->hb) rt->hb->write(stage, step, step_s, rt->last_compute_s);
    if (rt->inject) rt->inject->on_stage(stage, step);
  };
  auto prev_before = hooks.before_step;
  // Compute times leave out the main thread's run-queue waits (time it was ready but another
  // process had the CPU): on a shared machine a straggler verdict then measures the ranks'
  // work, not the scheduler. (A slow injection's delay is a sleep, which is not a wait.)
  hooks.before_step = [rt, prev_before](int64_t step) {
    if (prev_before) prev_before(step);
    rt->wait_step0 = thread_runqueue_wait_s();
    if (rt->inject) rt->inject->before_step(step, rt->unit_s, rt->counted_clock);
    rt->step_t0 = Clock::now();  // after an injected delay: it must not compound
    rt->wait_t0 = thread_runqueue_wait_s();
  };
  auto prev_backward = hooks.after_backward;
  hooks.after_backward = [rt, prev_backward](int64_t step, float* grads, size_t n) {
    if (prev_backward) prev_backward(step, grads, n);
    rt->unit_s = std::max(0.0, std::chrono::duration<double>(Clock::now() - rt->step_t0).count() - waited_since(rt->wait_t0));
    if (rt->inject) rt->inject->after_backward(step, grads, n);
  };
  // A straggler's peers wait for it inside the collectives: step time less communication
  // time is what tells them apart. The run-queue waits fall inside the collectives' time as
  // well as outside it, and which share is not known: the step's time outside them counts at
  // the fraction of the step the thread was not waiting. (Subtracting every wait from the
  // time outside the collectives took the waits inside them off twice: on a loaded machine
  // every rank's compute time came out 0, and a rank 8x slower was not found.)
  auto prev_on_step = hooks.on_step;
  hooks.on_step = [rt, prev_on_step](const StepRecord& r) {
    if (prev_on_step) prev_on_step(r);
    const double running = r.seconds > 0 ? std::clamp(1.0 - waited_since(rt->wait_step0) / r.seconds, 0.0, 1.0) : 1.0;
    rt->last_compute_s = std::max(0.0, r.seconds - r.comm_seconds) * running;
    if (rt->counted_clock)
      rt->last_compute_s = double(r.global_batch) * r.seq_len * 1e-6 * (rt->inject ? rt->inject->slow_factor(r.step) : 1.0);
    rt->window.push(rt->last_compute_s);
    if (rt->hb) rt->hb->set_window(rt->window, r.step);
  };
  auto prev_judge = hooks.judge;
  hooks.judge = [rt, prev_judge, resume = opt.resume](const StepCheck& c) {
    if (!rt->seeded && resume) rt->seed_from_metrics(c.step);
    rt->seeded = true;
    AnomalyDecision d = rt->detector->judge(c);
    if (!d.kind.empty()) rt->judged(c, d);
    StepVerdict v = d.verdict;
    if (prev_judge) v = std::max(v, prev_judge(c));
    return v;
  };
  auto prev_ckpt = hooks.after_checkpoint;
  hooks.after_checkpoint = [rt, prev_ckpt](int64_t step, const std::string& dir) {
    if (prev_ckpt) prev_ckpt(step, dir);
    if (rt->inject) rt->inject->after_checkpoint(step, dir);
  };
}

}  // namespace zaya::ft
