#include "ft/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "ft/diagnose.h"
#include "ft/heartbeat.h"
#include "ft/job.h"
#include "ft/rollback.h"
#include "ft/train_hooks.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace zaya::ft {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

double now_s() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string iso_time() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool has_flag(const std::vector<std::string>& a, const std::string& f) {
  return std::find(a.begin(), a.end(), f) != a.end();
}

std::string flag_value(const std::vector<std::string>& a, const std::string& f) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == f && i + 1 < a.size()) return a[i + 1];
    if (a[i].rfind(f + "=", 0) == 0) return a[i].substr(f.size() + 1);
  }
  return "";
}

struct Outcome {
  enum Kind { Success, Crash, Hang, Anomalies, Interrupted } kind = Success;
  int rank = -1;
  std::string stage, message;
  std::string cause;            // why a hang is put on `rank`
  json ranks = json::array();   // every rank's last stage (and process state for hangs)
  int exit_code = -1, signal = 0;
  int64_t step = 0;         // steps completed when it failed
  double failure_time = 0;  // when the run was last seen making progress
  int64_t first = 0, last = 0;  // anomaly window
  std::string anomaly;          // its kind (loss_spike, nonfinite, router_collapse, ...)
};

const char* kind_name(Outcome::Kind k) {
  switch (k) {
    case Outcome::Success: return "success";
    case Outcome::Crash: return "crash";
    case Outcome::Hang: return "hang";
    case Outcome::Anomalies: return "anomalies";
    case Outcome::Interrupted: return "interrupted";
  }
  return "?";
}

struct RankWatch {
  Heartbeat hb;
  bool have = false, stepped = false;
  double last_change = 0, dead_since = -1;
  bool reported = false;  // as a straggler, this attempt
  // The process sampled once its heartbeat had been quiet for half its timeout: what it did
  // from then to a hang verdict tells a rank polling a collective from one that is not.
  ProcSample probe;
  bool probed = false;
};

const char* state_name(char c) {
  switch (c) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk-wait";
    case 'T': return "stopped";
    case 't': return "traced";
    case 'Z': return "zombie";
    case 0: return "gone";
  }
  return "other";
}

class Supervisor {
 public:
  explicit Supervisor(LaunchOptions o) : o_(std::move(o)) {}
  int run();

 private:
  std::vector<std::string> command(bool resume) const;
  Outcome attempt(bool resume);
  void check_stragglers(std::vector<RankWatch>& w);
  void record(json incident);
  void settle_pending(bool recovered, double when);
  void summary(bool finished);
  void say(const char* fmt, ...) __attribute__((format(printf, 2, 3)));  // one event line to o_.on_event

  LaunchOptions o_;
  std::vector<std::string> args_;
  std::string out_dir_, ckpt_dir_, hb_dir_, incidents_path_;
  std::vector<std::pair<int64_t, int64_t>> skips_;
  int restarts_ = 0, attempt_no_ = 0;
  std::optional<json> pending_;  // the last restart's incident, waiting for its recovery
  double pending_failure_time_ = 0;
  int64_t pending_step_ = 0;
  std::map<std::string, int> counts_;
  std::vector<double> recover_s_;
  int64_t steps_lost_ = 0;
  int corrupt_skipped_ = 0;
  double hb_s_ = 0, steps_s_ = 0;
  int64_t hb_writes_ = 0;
  bool finalize_hung_ = false;
};

void Supervisor::say(const char* fmt, ...) {
  if (!o_.on_event) return;
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string line(size_t(std::max(n, 0)), '\0');
  std::vsnprintf(line.data(), line.size() + 1, fmt, ap2);
  va_end(ap2);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  o_.on_event(line);
}

std::vector<std::string> Supervisor::command(bool resume) const {
  std::vector<std::string> c;
  if (o_.np > 1) {
    c = {o_.mpirun};
    if (::geteuid() == 0) c.push_back("--allow-run-as-root");
    c.insert(c.end(), {"--oversubscribe", "-np", std::to_string(o_.np)});
  }
  c.push_back(o_.zaya);
  c.push_back("train");
  c.insert(c.end(), args_.begin(), args_.end());
  c.insert(c.end(), {"--heartbeat-dir", hb_dir_});
  if (resume && !has_flag(args_, "--resume")) c.push_back("--resume");
  for (auto [a, b] : skips_) c.insert(c.end(), {"--skip-steps", cat(a, ":", b)});
  return c;
}

void Supervisor::record(json incident) {
  std::ofstream out(incidents_path_, std::ios::app);
  out << incident.dump() << "\n";
}

// The restart's incident is written once the run is back where it failed (or at the next
// failure / the end, unrecovered): seconds_lost is then known.
void Supervisor::settle_pending(bool recovered, double when) {
  if (!pending_) return;
  json& j = *pending_;
  const double lost = std::max(0.0, when - pending_failure_time_);
  j["recovered"] = recovered;
  j["seconds_lost"] = std::round(lost * 1000) / 1000;
  if (recovered) recover_s_.push_back(lost);
  record(j);
  pending_.reset();
}

// Judged on the windows the heartbeats carry: every later heartbeat (the last one, "done",
// included) still holds a rank's window, so no poll can miss a straggler.
void Supervisor::check_stragglers(std::vector<RankWatch>& w) {
  std::vector<Heartbeat> hbs;
  for (const RankWatch& r : w) {
    if (!r.have) return;
    hbs.push_back(r.hb);
  }
  for (const StragglerFinding& f : find_stragglers(hbs, o_.straggler_factor)) {
    RankWatch& r = w[size_t(f.rank)];
    if (r.reported) continue;
    r.reported = true;
    ++counts_["straggler"];
    const double factor = f.window_s / f.baseline_s;
    say("launch: straggler: rank %d computes a step in %.3f s (median of %d steps to step %lld), %.1fx the "
                "ranks' median %.3f s\n",
                f.rank, f.window_s, r.hb.window_n, (long long)f.step, factor, f.baseline_s);
    record({{"time", iso_time()}, {"unix", std::time(nullptr)}, {"kind", "straggler"}, {"rank", f.rank},
            {"step_at_failure", f.step}, {"step_resumed_from", nullptr}, {"seconds_lost", 0},
            {"compute_s", f.window_s}, {"median_s", f.baseline_s}, {"factor", factor},
            {"window_steps", r.hb.window_n}, {"attempt", attempt_no_}});
  }
}

Outcome Supervisor::attempt(bool resume) {
  ++attempt_no_;
  std::error_code ec;
  fs::create_directories(hb_dir_, ec);
  for (int r = 0; r < std::max(o_.np, 64); ++r) fs::remove(heartbeat_path(hb_dir_, r), ec);
  fs::remove(fs::path(out_dir_) / kAbortFile, ec);
  const std::vector<std::string> cmd = command(resume);
  std::string line;
  for (const std::string& c : cmd) line += (line.empty() ? "" : " ") + c;
  say("launch: attempt %d: %s\n", attempt_no_, line.c_str());

  Job job(cmd);
  const double t_start = now_s();
  std::vector<RankWatch> w(size_t(o_.np));
  for (RankWatch& r : w) r.last_change = t_start;
  int64_t progress = -1;
  double progress_time = t_start;
  Outcome out;
  int rank_signal = 0;  // under mpirun: the failed rank's signal, as mpirun reports it
  auto rank_pids = [&] {
    std::vector<int> p;
    for (const RankWatch& r : w)
      if (r.have) p.push_back(r.hb.pid);
    return p;
  };
  // Progress = the least step over the ranks, timed by the heartbeats' own clock (polling
  // may see a step late, or only in the file a dead rank left behind).
  auto read_all = [&](double now) {
    const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (int r = 0; r < o_.np; ++r) {
      Heartbeat hb;
      RankWatch& x = w[size_t(r)];
      if (!read_heartbeat(heartbeat_path(hb_dir_, r), hb) || (x.have && hb.seq == x.hb.seq)) continue;
      x.hb = hb;
      x.have = true;
      x.last_change = now;
      x.probed = false;
      if (hb.stage == "step") x.stepped = true;
    }
    int64_t least = -1;
    double when = 0;
    bool all = true;
    for (const RankWatch& x : w) {
      if (!x.have) all = false;
      else if (least < 0 || x.hb.step < least) least = x.hb.step, when = x.hb.time;
      else if (x.hb.step == least) when = std::max(when, x.hb.time);
    }
    if (all && least > progress) progress = least, progress_time = std::min(now, now - (wall - when));
    if (pending_ && all && least >= pending_step_) settle_pending(true, std::min(now, now - (wall - when)));
  };
  auto finish = [&](Outcome::Kind k, int rank, const std::string& stage) {
    read_all(now_s());
    out.kind = k;
    out.rank = rank;
    out.stage = stage;
    if (stage.empty() && rank >= 0 && w[size_t(rank)].have) out.stage = w[size_t(rank)].hb.stage;
    out.step = std::max<int64_t>(progress, 0);
    out.failure_time = progress_time;
    if (out.ranks.empty())
      for (int r = 0; r < o_.np; ++r) {
        const RankWatch& x = w[size_t(r)];
        out.ranks.push_back({{"rank", r}, {"stage", x.have ? x.hb.stage : "startup"},
                             {"step", x.have ? json(x.hb.step) : json(nullptr)}});
      }
  };
  // How long a rank's heartbeat may stay unchanged in the stage it is in.
  auto limit_of = [&](const RankWatch& x) {
    if (x.have && x.hb.stage == "done") return o_.finalize_timeout;
    const bool ckpt = x.have && x.hb.stage == "checkpoint";
    return !x.stepped && !ckpt ? o_.startup_timeout : ckpt ? o_.checkpoint_timeout : o_.step_timeout;
  };
  // A hang's verdict: every rank's last stage and process state, and the rank to blame.
  auto hang = [&](double now, bool finalize) {
    std::vector<RankState> st;
    json ranks = json::array();
    for (int r = 0; r < o_.np; ++r) {
      const RankWatch& x = w[size_t(r)];
      const ProcSample p = x.have ? sample_process(x.hb.pid) : ProcSample{};
      RankState s;
      s.have = x.have;
      s.stage = x.have ? x.hb.stage : "startup";
      s.step = x.hb.step;
      s.hb_time = x.hb.time;
      s.state = p.ok ? p.state : 0;
      s.activity = x.probed ? activity_between(x.probe, p) : -1;
      st.push_back(s);
      ranks.push_back({{"rank", r},
                       {"stage", s.stage},
                       {"step", x.have ? json(s.step) : json(nullptr)},
                       {"quiet_s", std::round((now - x.last_change) * 10) / 10},
                       {"process", state_name(s.state)},
                       {"activity", s.activity == 1   ? json("polling")
                                    : s.activity == 0 ? json("idle")
                                                      : json(nullptr)}});
    }
    HangVerdict v = attribute_hang(st);
    if (finalize) {
      // Every rank is done: only a stopped rank or launcher is a culprit worth naming.
      const ProcSample launcher = o_.np > 1 ? sample_process(job.pid()) : ProcSample{};
      const bool rank_stopped = v.rank >= 0 && (st[size_t(v.rank)].state == 'T' || st[size_t(v.rank)].state == 't');
      if (!rank_stopped)
        v = {-1, launcher.state == 'T' || launcher.state == 't'
                     ? cat(o_.mpirun, " (pid ", job.pid(), ") is stopped")
                     : "the job did not exit after every rank reported done"};
    }
    if (v.rank >= 0) say("launch: hang attributed to rank %d: %s\n", v.rank, v.cause.c_str());
    else say("launch: hang: %s\n", v.cause.c_str());
    out.ranks = ranks;
    out.cause = v.cause;
    finish(Outcome::Hang, v.rank, finalize ? "finalize" : v.rank >= 0 ? st[size_t(v.rank)].stage : "startup");
  };
  double all_done_since = -1;
  for (;;) {
    job.pump_stderr();
    const double now = now_s();
    read_all(now);

    if (job.poll_exit()) {
      job.pump_stderr();
      if (job.exit_code() == 0) {
        out.kind = Outcome::Success;
        break;
      }
      // Which rank: under mpirun, the one whose process went first; alone, rank 0.
      int rank = o_.np == 1 ? 0 : -1, sig = 0;
      double first = 1e300;
      for (int r = 0; r < o_.np && o_.np > 1; ++r)
        if (w[size_t(r)].dead_since >= 0 && w[size_t(r)].dead_since < first) rank = r, first = w[size_t(r)].dead_since;
      if (o_.np > 1 && job.launcher_failed_rank(sig) >= 0) rank = job.launcher_failed_rank(sig), rank_signal = sig;
      std::ifstream abort_file(fs::path(out_dir_) / kAbortFile);
      if (job.exit_code() == kExitAnomalies || abort_file) {
        finish(Outcome::Anomalies, rank < 0 ? 0 : rank, "step");
        json a = json::parse(abort_file, nullptr, false);
        out.first = a.is_object() ? a.value("first", int64_t(0)) : 0;
        out.last = a.is_object() ? a.value("last", int64_t(0)) : 0;
        out.anomaly = a.is_object() ? a.value("kind", std::string()) : "";
        if (out.last > 0) out.step = out.last;
      } else {
        finish(Outcome::Crash, rank, "");
      }
      break;
    }
    if (g_interrupted) {
      finish(Outcome::Interrupted, -1, "");
      break;
    }
    // A rank gone while the job runs (mpirun): give the launcher a moment to end on its own.
    bool crashed = false;
    for (int r = 0; r < o_.np && o_.np > 1; ++r) {
      RankWatch& x = w[size_t(r)];
      if (!x.have || x.hb.stage == "done" || x.dead_since >= 0 || process_alive(x.hb.pid)) continue;
      x.dead_since = now;
    }
    for (int r = 0; r < o_.np && !crashed; ++r)
      if (w[size_t(r)].dead_since >= 0 && now - w[size_t(r)].dead_since > 3.0) {
        finish(Outcome::Crash, r, "");
        crashed = true;
      }
    if (crashed) break;
    // Hangs: no progress within the timeout of the stage a rank is in, or the job still
    // there finalize_timeout after every rank reported done.
    bool all_done = true;
    int tripped = -1;
    for (int r = 0; r < o_.np; ++r) {
      RankWatch& x = w[size_t(r)];
      const double limit = limit_of(x), quiet = now - x.last_change;
      if (x.have && !x.probed && quiet >= limit / 2) x.probe = sample_process(x.hb.pid), x.probed = true;
      const bool done = x.have && x.hb.stage == "done";
      all_done = all_done && done;
      if (done || quiet <= limit || tripped >= 0) continue;
      tripped = r;
      const bool ckpt = x.have && x.hb.stage == "checkpoint";
      const char* which = !x.stepped && !ckpt ? "start-up" : ckpt ? "checkpoint" : "step";
      say("launch: rank %d: no heartbeat progress for %.1f s (stage %s, %s timeout %.1f s)\n", r, quiet,
                  x.have ? x.hb.stage.c_str() : "startup", which, limit);
    }
    if (all_done && all_done_since < 0) all_done_since = now;
    const bool finalize_hang = all_done && now - all_done_since > o_.finalize_timeout;
    if (finalize_hang)
      say("launch: the job has not exited %.1f s after every rank reported done (finalize timeout %.1f s)\n",
                  now - all_done_since, o_.finalize_timeout);
    if (tripped >= 0 || finalize_hang) {
      hang(now, tripped < 0);
      break;
    }
    check_stragglers(w);
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.poll_s));
  }
  if (out.kind != Outcome::Success || !job.exited()) job.terminate(rank_pids(), o_.term_grace_s);
  read_all(now_s());  // the heartbeats the ranks left: their last windows
  check_stragglers(w);
  out.exit_code = job.exit_code();
  out.signal = rank_signal ? rank_signal : job.signal();
  out.message = job.last_error_line();
  for (const RankWatch& x : w) {
    if (!x.have) continue;
    hb_s_ += x.hb.hb_s;
    steps_s_ += x.hb.steps_s;
    hb_writes_ += x.hb.writes;
  }
  return out;
}

int Supervisor::run() {
  args_ = o_.train_args;
  if (!args_.empty() && args_[0] == "train") args_.erase(args_.begin());
  const std::string config = flag_value(args_, "--config");
  ZAYA_CHECK(!config.empty(), "launch: the train arguments after -- need --config RUN.toml");
  RunConfig cfg = load_run_config(config);
  const std::string out = flag_value(args_, "--out");
  if (!out.empty()) {  // the same override `zaya train --out` applies
    if (cfg.ckpt_dir == cfg.out_dir + "/ckpt") cfg.ckpt_dir = out + "/ckpt";
    cfg.out_dir = out;
  }
  out_dir_ = cfg.out_dir;
  ckpt_dir_ = cfg.ckpt_dir;
  hb_dir_ = (fs::path(out_dir_) / "heartbeat").string();
  incidents_path_ = (fs::path(out_dir_) / "incidents.jsonl").string();
  std::error_code ec;
  fs::create_directories(out_dir_, ec);
  bool resume = has_flag(args_, "--resume");
  if (!resume) fs::remove(incidents_path_, ec);
  if (o_.zaya.empty()) o_.zaya = fs::read_symlink("/proc/self/exe").string();

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  bool finished = false;
  for (;;) {
    Outcome o = attempt(resume);
    if (o.kind == Outcome::Success) {
      settle_pending(true, now_s());
      finished = true;
      break;
    }
    settle_pending(false, now_s());
    if (o.kind == Outcome::Interrupted) {
      say("launch: interrupted; the job is ended\n");
      break;
    }
    ++counts_[kind_name(o.kind)];
    std::string how = o.kind == Outcome::Hang ? "hung" : o.kind == Outcome::Anomalies ? "aborted on anomalies" : "";
    if (o.kind == Outcome::Crash)
      how = o.signal ? cat("killed by signal ", o.signal) : o.exit_code >= 0 ? cat("exited with code ", o.exit_code) : "died";
    say("launch: %s: %s %s at step %lld%s%s\n", kind_name(o.kind),
                o.rank >= 0 ? cat("rank ", o.rank).c_str() : "the job", how.c_str(),
                (long long)o.step, o.stage.empty() ? "" : cat(" (stage ", o.stage, ")").c_str(),
                o.message.empty() ? "" : cat(": ", o.message).c_str());
    json inc = {{"time", iso_time()},       {"unix", std::time(nullptr)},
                {"kind", kind_name(o.kind)}, {"rank", o.rank < 0 ? json(nullptr) : json(o.rank)},
                {"stage", o.stage},          {"step_at_failure", o.step},
                {"attempt", attempt_no_},    {"exit_code", o.exit_code >= 0 ? json(o.exit_code) : json(nullptr)},
                {"signal", o.signal ? json(o.signal) : json(nullptr)}, {"message", o.message},
                {"ranks", o.ranks}};
    if (!o.cause.empty()) inc["cause"] = o.cause;
    // A finalisation hang comes after the last save: no restart while that save verifies.
    std::optional<ResumePoint> final_rp;
    if (o.kind == Outcome::Hang && o.stage == "finalize") {
      final_rp = choose_resume_point(ckpt_dir_);
      if (final_rp->corrupt.empty()) {
        inc["final_checkpoint"] = final_rp->dir.empty() ? json(nullptr) : json(final_rp->step);
        inc["step_resumed_from"] = nullptr;
        inc["seconds_lost"] = 0;
        record(inc);
        say("launch: the training is complete (%s); the job was ended, no restart\n",
                    final_rp->dir.empty() ? "no checkpoint saved"
                                          : cat("checkpoint step ", final_rp->step, " verifies").c_str());
        finalize_hung_ = finished = true;
        break;
      }
    }
    if (restarts_ >= o_.max_restarts) {
      inc["step_resumed_from"] = nullptr;
      inc["gave_up"] = true;
      inc["seconds_lost"] = nullptr;
      record(inc);
      say("launch: giving up after %d restart(s) (--max-restarts %d)\n", restarts_, o_.max_restarts);
      break;
    }
    const int64_t below = o.kind == Outcome::Anomalies ? o.first : 0;
    ResumePoint rp = final_rp ? *final_rp : choose_resume_point(ckpt_dir_, below);
    json corrupt = json::array();
    for (auto& [step, err] : rp.corrupt) {
      say("launch: checkpoint step %lld does not verify (%s); falling back to an older one\n",
                  (long long)step, err.c_str());
      corrupt.push_back({{"step", step}, {"error", err}});
      ++corrupt_skipped_;
    }
    if (!rp.rolled_back.empty())
      say("launch: %zu checkpoint(s) inside or after the anomaly window set aside\n", rp.rolled_back.size());
    if (o.kind == Outcome::Anomalies && o.first > 0) {
      skips_.push_back({o.first, o.last});
      inc["skip_window"] = {o.first, o.last};
      if (!o.anomaly.empty()) inc["anomaly"] = o.anomaly;
    }
    ++restarts_;
    const double backoff = std::min(o_.backoff_max_s, o_.backoff_s * std::pow(2.0, restarts_ - 1));
    inc["step_resumed_from"] = rp.step;
    inc["checkpoint"] = rp.dir;
    inc["steps_lost"] = std::max<int64_t>(0, o.step - rp.step);
    inc["fallback_from"] = corrupt;
    inc["backoff_s"] = backoff;
    inc["restart"] = restarts_;
    steps_lost_ += std::max<int64_t>(0, o.step - rp.step);
    pending_ = inc;
    pending_failure_time_ = o.failure_time;
    pending_step_ = o.step;
    say("launch: restart %d/%d in %.2f s from %s%s\n", restarts_, o_.max_restarts, backoff,
                rp.dir.empty() ? "scratch (no checkpoint verifies)" : rp.dir.c_str(),
                o.kind == Outcome::Anomalies ? cat(", skipping steps ", o.first, "-", o.last).c_str() : "");
    const double until = now_s() + backoff;
    while (now_s() < until && !g_interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (g_interrupted) break;
    resume = true;
  }
  settle_pending(false, now_s());
  summary(finished);
  return !finished ? 1 : finalize_hung_ ? kExitFinalizeHang : 0;
}

void Supervisor::summary(bool finished) {
  double mean = 0, mx = 0;
  for (double s : recover_s_) mean += s / double(recover_s_.size()), mx = std::max(mx, s);
  const double overhead = steps_s_ > 0 ? hb_s_ / steps_s_ : 0;
  json j = {{"finished", finished},
            {"finalize_hang", finalize_hung_},
            {"attempts", attempt_no_},
            {"restarts", restarts_},
            {"incidents", counts_},
            {"recovered", recover_s_.size()},
            {"recover_s_mean", mean},
            {"recover_s_max", mx},
            {"steps_lost", steps_lost_},
            {"corrupt_checkpoints_skipped", corrupt_skipped_},
            {"skip_windows", skips_},
            {"heartbeat_writes", hb_writes_},
            {"heartbeat_s", hb_s_},
            {"step_s", steps_s_},
            {"heartbeat_overhead", overhead}};
  const std::string text = j.dump(1) + "\n";
  write_file_atomic((fs::path(out_dir_) / "launch-summary.json").string(), text.data(), text.size());
  std::string inc;
  for (auto& [k, n] : counts_) inc += cat(inc.empty() ? "" : ", ", k, " ", n);
  say("launch summary: %s; %d attempt(s), %d restart(s); incidents: %s\n",
              !finished        ? "NOT finished"
              : finalize_hung_ ? "finished, but the job hung in finalisation"
                               : "finished",
              attempt_no_, restarts_, inc.empty() ? "none" : inc.c_str());
  say("launch summary: recovered %zu, seconds lost mean %.2f max %.2f, steps lost %lld, corrupt "
              "checkpoints skipped %d, skipped windows %zu\n",
              recover_s_.size(), mean, mx, (long long)steps_lost_, corrupt_skipped_, skips_.size());
  say("launch summary: heartbeat overhead %.4f%% of step time (%lld writes, %.1f us each)\n", 100 * overhead,
              (long long)hb_writes_, hb_writes_ ? 1e6 * hb_s_ / double(hb_writes_) : 0.0);
}

}  // namespace

int supervise(const LaunchOptions& o) { return Supervisor(o).run(); }

}  // namespace zaya::ft
