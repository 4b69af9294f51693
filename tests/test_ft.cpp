// Fault tolerance units: fault spec parsing, the anomaly detector (NaN, z-score spikes,
// K consecutive -> abort), heartbeat records and their rolling compute window, straggler and
// hang verdicts, checkpoint corruption and the supervisor's choice of a resume point. The
// end-to-end proofs are tests/ft_*.sh.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "test_util.h"
#include "ft/anomaly.h"
#include "ft/diagnose.h"
#include "ft/heartbeat.h"
#include "ft/inject.h"
#include "ft/rollback.h"
#include "ft/train_hooks.h"

using namespace zaya;
using namespace zaya::ft;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("ft", tag) {}
};

using test_util::error_of;

StepCheck check(int64_t step, double loss, double gnorm) {
  StepCheck c;
  c.step = step;
  c.loss = loss;
  c.grad_norm = gnorm;
  c.finite = std::isfinite(loss) && std::isfinite(gnorm);
  return c;
}

// A small checkpoint with one params file and one optimizer file.
std::string save_ckpt(const std::string& root, int64_t step, float value) {
  std::vector<float> p(64, value), m(64, value / 2);
  CheckpointWriter w(root, step);
  w.add_f32("params-r00000.safetensors", "param/w", {8, 8}, 0, 64, p.data());
  w.add_f32("optim-r00000.safetensors", "optim.m/w", {8, 8}, 0, 64, m.data());
  std::vector<nlohmann::json> pieces = {w.write_files()};
  return w.commit({{"state", nlohmann::json::object()}}, pieces);
}

}  // namespace

TEST(FaultSpec, ParsesEveryKind) {
  std::vector<FaultSpec> f = parse_faults(
      "kill:rank=1,step=5; hang:rank=0,step=7 nan:step=4;corrupt-ckpt:step=10;enospc:step=10;slow:rank=1,factor=3;"
      "hang:step=3,at=checkpoint;spike:step=6,factor=50;corrupt-ckpt;stop:rank=1,step=4,at=checkpoint");
  ASSERT_EQ(f.size(), 10u);
  EXPECT_EQ(f[0].kind, FaultKind::Kill);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[0].step, 5);
  EXPECT_EQ(f[1].kind, FaultKind::Hang);
  EXPECT_FALSE(f[1].at_checkpoint);
  EXPECT_EQ(f[2].kind, FaultKind::Nan);
  EXPECT_EQ(f[2].rank, 0);
  EXPECT_EQ(f[3].kind, FaultKind::CorruptCkpt);
  EXPECT_EQ(f[3].step, 10);
  EXPECT_EQ(f[4].kind, FaultKind::Enospc);
  EXPECT_EQ(f[4].nth, 2);
  EXPECT_EQ(f[5].kind, FaultKind::Slow);
  EXPECT_DOUBLE_EQ(f[5].factor, 3);
  EXPECT_EQ(f[5].step, -1);
  EXPECT_TRUE(f[6].at_checkpoint);
  EXPECT_DOUBLE_EQ(f[7].factor, 50);
  EXPECT_EQ(f[8].step, -1);
  EXPECT_EQ(f[0].text(), "kill:rank=1,step=5");
  EXPECT_EQ(f[8].text(), "corrupt-ckpt");
  EXPECT_EQ(f[9].kind, FaultKind::Stop);
  EXPECT_EQ(f[9].text(), "stop:rank=1,step=4,at=checkpoint");
  for (const FaultSpec& s : f) EXPECT_EQ(parse_fault(s.text()).text(), s.text());
}

TEST(FaultSpec, ErrorsNameTheSpecAndKey) {
  EXPECT_NE(error_of([] { parse_fault("explode:step=3"); }).find("unknown fault \"explode\""), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("kill:rank=1"); }).find("step=S is required for kill"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("kill:rank=x,step=2"); }).find("rank=x is not an integer"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("slow:rank=1,factor=0.5"); }).find("factor=F > 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("nan:step=2,color=red"); }).find("unknown key \"color\" for nan"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("kill:step=2,step=3"); }).find("step given twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("hang:step=2,at=eval"); }).find("at=eval must be step or checkpoint"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("stop:rank=1"); }).find("step=S is required for stop"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("kill:step=2,nth=3"); }).find("nth=K needs at=checkpoint"), std::string::npos);
  EXPECT_NE(error_of([] { parse_fault("kill:step=2,at=checkpoint,nth=0"); }).find("nth=0 is not an integer >= 1"),
            std::string::npos);
}

TEST(FaultSpec, KillInASaveAtItsStartOrItsNthWrite) {
  FaultSpec start = parse_fault("kill:step=5,at=checkpoint");
  EXPECT_TRUE(start.at_checkpoint);
  EXPECT_EQ(start.nth, 0);
  EXPECT_EQ(start.text(), "kill:rank=0,step=5,at=checkpoint");
  FaultSpec third = parse_fault("kill:rank=1,step=5,at=checkpoint,nth=3");
  EXPECT_EQ(third.nth, 3);
  EXPECT_EQ(third.text(), "kill:rank=1,step=5,at=checkpoint,nth=3");
  EXPECT_EQ(parse_fault(third.text()).text(), third.text());
  EXPECT_EQ(parse_fault("kill:step=5").nth, 0);
}

TEST(Injector, SlowFactorAppliesToItsRankFromItsStep) {
  TempDir d("slow");
  FaultInjector r1(parse_faults("slow:rank=1,factor=8,step=4"), 1, d / "f.jsonl", false);
  EXPECT_DOUBLE_EQ(r1.slow_factor(3), 1.0);
  EXPECT_DOUBLE_EQ(r1.slow_factor(4), 8.0);
  EXPECT_DOUBLE_EQ(r1.slow_factor(40), 8.0);
  FaultInjector r0(parse_faults("slow:rank=1,factor=8"), 0, d / "g.jsonl", false);
  EXPECT_DOUBLE_EQ(r0.slow_factor(4), 1.0);
  FaultInjector all(parse_faults("slow:rank=0,factor=2"), 0, d / "h.jsonl", false);
  EXPECT_DOUBLE_EQ(all.slow_factor(1), 2.0) << "no step: slow from the start";
  // Counted clock: no sleep, whatever the unit (an hour here would hang the test).
  all.before_step(2, 3600.0, true);
}

TEST(Injector, KillAtTheNthWriteOfASaveLeavesLatestVerifiable) {
  for (int nth : {1, 2, 3, 4}) {
    TempDir d("killsave");
    save_ckpt(d / "ckpt", 2, 1.0f);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      FaultInjector inj(parse_faults(cat("kill:step=4,at=checkpoint,nth=", nth)), 0, d / "f.jsonl", false);
      inj.on_stage("checkpoint", 4);
      save_ckpt(d / "ckpt", 4, 2.0f);  // params, optim, manifest, latest: the kill lands before one
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "nth=" << nth << ": the save was not killed";
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    std::ifstream rec(d / "f.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(rec, line)) << "the kill was not recorded";
    EXPECT_NE(line.find(cat("nth=", nth)), std::string::npos) << line;
    Checkpoint ck(d / "ckpt");
    EXPECT_EQ(ck.step(), 2) << "nth=" << nth << ": latest moved before the save completed";
    ck.verify();
  }
  // Past the last write (4 files): the save completes, nothing fires.
  TempDir d("killsave5");
  FaultInjector inj(parse_faults("kill:step=4,at=checkpoint,nth=5"), 0, d / "f.jsonl", false);
  inj.on_stage("checkpoint", 4);
  save_ckpt(d / "ckpt", 4, 2.0f);
  inj.on_stage("checkpoint_done", 4);
  EXPECT_EQ(Checkpoint(d / "ckpt").step(), 4);
  EXPECT_FALSE(fs::exists(d / "f.jsonl"));
}

TEST(SkipWindows, Parse) {
  EXPECT_EQ(parse_skip_window("6:8"), (std::pair<int64_t, int64_t>{6, 8}));
  EXPECT_EQ(parse_skip_window("4"), (std::pair<int64_t, int64_t>{4, 4}));
  EXPECT_NE(error_of([] { parse_skip_window("8:6"); }).find("ends before it starts"), std::string::npos);
  EXPECT_NE(error_of([] { parse_skip_window("0:2"); }).find("not a step >= 1"), std::string::npos);
  FtTrainOptions o;
  o.skip_steps = {"3:4,9", "12:12"};
  TrainerOptions t;
  TrainerHooks h;
  TempDir d("skip");
  install(o, t, h, d / "out", 0);
  ASSERT_EQ(t.skip_steps.size(), 3u);
  EXPECT_EQ(t.skip_steps[1], (std::pair<int64_t, int64_t>{9, 9}));
}

TEST(Anomaly, RollingZScore) {
  RollingWindow w(4);
  for (double x : {1.0, 2.0, 3.0, 4.0, 5.0}) w.push(x);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_DOUBLE_EQ(w.mean(), 3.5);
  EXPECT_NEAR(w.stddev(), std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_NEAR(w.zscore(3.5 + 2 * w.stddev()), 2.0, 1e-12);
  RollingWindow flat(4);
  for (int i = 0; i < 4; ++i) flat.push(2.0);
  EXPECT_NEAR(flat.zscore(2.02), 1.0, 1e-9);  // floored deviation: 1% of the mean
}

TEST(Anomaly, NonFiniteIsSkippedAndKConsecutiveAbort) {
  AnomalyOptions o;
  o.max_consecutive = 3;
  AnomalyDetector d(o);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(d.judge(check(1, 3.0, 1.0)).verdict, StepVerdict::Update);
  AnomalyDecision a = d.judge(check(2, nan, 1.0));
  EXPECT_EQ(a.verdict, StepVerdict::Skip);
  EXPECT_EQ(a.kind, "nonfinite");
  EXPECT_EQ(d.judge(check(3, 3.0, INFINITY)).verdict, StepVerdict::Skip);
  EXPECT_EQ(d.judge(check(4, 2.9, 1.0)).verdict, StepVerdict::Update);  // the run of anomalies ends
  EXPECT_EQ(d.judge(check(5, nan, nan)).verdict, StepVerdict::Skip);
  EXPECT_EQ(d.judge(check(6, nan, nan)).verdict, StepVerdict::Skip);
  a = d.judge(check(7, nan, nan));
  EXPECT_EQ(a.verdict, StepVerdict::Abort);
  EXPECT_EQ(a.first_step, 5);
  EXPECT_EQ(a.consecutive, 3);
  EXPECT_EQ(d.anomalies(), 5);
  // K = 0: never abort.
  AnomalyOptions never;
  never.max_consecutive = 0;
  AnomalyDetector n(never);
  for (int s = 1; s <= 20; ++s) EXPECT_EQ(n.judge(check(s, nan, nan)).verdict, StepVerdict::Skip);
}

TEST(Anomaly, SpikesByZScoreOffByDefault) {
  AnomalyDetector off{AnomalyOptions{}};
  AnomalyOptions o;
  o.loss_z = 6;
  o.grad_norm_z = 6;
  o.window = 10;
  o.min_history = 5;
  AnomalyDetector d(o);
  for (int s = 1; s <= 10; ++s) {
    const double loss = 3.0 - 0.01 * s + 0.002 * (s % 3), gn = 1.0 + 0.05 * (s % 4);
    EXPECT_EQ(d.judge(check(s, loss, gn)).verdict, StepVerdict::Update) << s;
    EXPECT_EQ(off.judge(check(s, loss, gn)).verdict, StepVerdict::Update);
  }
  AnomalyDecision a = d.judge(check(11, 2.9, 40.0));
  EXPECT_EQ(a.verdict, StepVerdict::Skip);
  EXPECT_EQ(a.kind, "grad_norm_spike");
  EXPECT_GT(a.z, 6);
  EXPECT_EQ(off.judge(check(11, 2.9, 40.0)).verdict, StepVerdict::Update);
  a = d.judge(check(12, 9.0, 1.0));
  EXPECT_EQ(a.kind, "loss_spike");
  EXPECT_EQ(a.consecutive, 2);
  // Skipped values stay out of the window: the next normal step is normal.
  EXPECT_EQ(d.judge(check(13, 2.88, 1.05)).verdict, StepVerdict::Update);
  // A falling loss is never a spike.
  EXPECT_EQ(d.judge(check(14, 1.0, 1.0)).verdict, StepVerdict::Update);
}

TEST(Heartbeat, WritesAndReadsInPlace) {
  TempDir d("hb");
  HeartbeatWriter w(d / "hb", 3);
  Heartbeat hb;
  EXPECT_FALSE(read_heartbeat(heartbeat_path(d / "hb", 2), hb));
  w.write("start", 0, 0, 0);
  w.write("step", 1, 0.25, 0.2);
  ASSERT_TRUE(read_heartbeat(heartbeat_path(d / "hb", 3), hb));
  EXPECT_EQ(hb.seq, 2);
  EXPECT_EQ(hb.rank, 3);
  EXPECT_EQ(hb.pid, int(::getpid()));
  EXPECT_EQ(hb.stage, "step");
  EXPECT_EQ(hb.step, 1);
  EXPECT_DOUBLE_EQ(hb.step_s, 0.25);
  EXPECT_DOUBLE_EQ(hb.compute_s, 0.2);
  EXPECT_EQ(hb.writes, 2);
  EXPECT_GT(hb.time, 1.6e9);
  EXPECT_EQ(fs::file_size(heartbeat_path(d / "hb", 3)), 512u);
  EXPECT_FALSE(hb.window_full());
  MedianWindow win(2);
  win.push(0.5);
  win.push(0.25);
  w.set_window(win, 7);
  w.write("done", 7, 0, 0);
  ASSERT_TRUE(read_heartbeat(heartbeat_path(d / "hb", 3), hb));
  EXPECT_DOUBLE_EQ(hb.window_s, 0.375);
  EXPECT_EQ(hb.window_n, 2);
  EXPECT_EQ(hb.window_w, 2);
  EXPECT_EQ(hb.window_step, 7);
  EXPECT_TRUE(hb.window_full());
  // A torn record (seq at the ends differ) is rejected.
  std::ofstream(d / "torn.json") << "{\"seq\":5,\"stage\":\"step\",\"seq2\":4}";
  EXPECT_FALSE(read_heartbeat(d / "torn.json", hb));
}

TEST(Heartbeat, MedianWindowKeepsTheLastW) {
  MedianWindow w(3);
  EXPECT_EQ(w.median(), 0);
  w.push(5);
  EXPECT_EQ(w.median(), 5);
  w.push(1);
  EXPECT_EQ(w.median(), 3);
  w.push(100);
  EXPECT_EQ(w.median(), 5);  // one outlier does not move it
  w.push(2);
  w.push(2);  // 5 and 1 are gone: {100, 2, 2}
  EXPECT_EQ(w.size(), 3);
  EXPECT_EQ(w.median(), 2);
  EXPECT_NE(error_of([] { MedianWindow(0); }).find("size 0"), std::string::npos);
}

// The hooks feed each step's compute time (step less communication) into the window that
// every later heartbeat carries, "done" included.
TEST(Heartbeat, TrainHooksReportTheWindow) {
  TempDir d("hbwin");
  FtTrainOptions o;
  o.heartbeat_dir = d / "hb";
  o.straggler_window = 3;
  TrainerOptions t;
  TrainerHooks h;
  install(o, t, h, d / "out", 1);
  const double compute[] = {0.9, 0.2, 0.3, 0.4};
  for (int i = 0; i < 4; ++i) {
    StepRecord r;
    r.step = i + 1;
    r.seconds = compute[i] + 0.5;
    r.comm_seconds = 0.5;
    h.on_step(r);
    h.heartbeat("step", i + 1, r.seconds);
  }
  h.heartbeat("done", 4, 0);
  Heartbeat hb;
  ASSERT_TRUE(read_heartbeat(heartbeat_path(d / "hb", 1), hb));
  EXPECT_EQ(hb.stage, "done");
  EXPECT_NEAR(hb.window_s, 0.3, 1e-9);
  EXPECT_EQ(hb.window_n, 3);
  EXPECT_EQ(hb.window_step, 4);
  o.straggler_window = 0;
  EXPECT_NE(error_of([&] { install(o, t, h, d / "out", 1); }).find("--straggler-window 0"), std::string::npos);
}

namespace {
Heartbeat windowed(double s, int n, int w = 4) {
  Heartbeat h;
  h.window_s = s;
  h.window_n = n;
  h.window_w = w;
  h.window_step = 10;
  return h;
}
}  // namespace

// The run-queue wait that compute times leave out: read per thread, never decreasing, and
// it grows for a thread that is ready to run while another holds its only CPU. Two threads
// pin themselves to one CPU, take their first reading, meet at a barrier, then each spins
// for 20 ms of its own CPU time: from the barrier on both are runnable on that CPU, so
// whichever the scheduler runs first, the other waits (however loaded the machine).
TEST(Straggler, RunQueueWaitIsReadPerThread) {
  const double w0 = thread_runqueue_wait_s();
  if (w0 < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat on this kernel";
  EXPECT_GE(thread_runqueue_wait_s(), w0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  double waited[2] = {0, 0};
  std::barrier both(2);
  auto spin = [&](int i) {
    const bool pinned = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
    const double a = thread_runqueue_wait_s();
    both.arrive_and_wait();
    timespec t0{}, t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while (double(t.tv_sec - t0.tv_sec) + 1e-9 * double(t.tv_nsec - t0.tv_nsec) < 0.02);
    waited[i] = pinned ? thread_runqueue_wait_s() - a : -1;
  };
  std::thread a(spin, 0), b(spin, 1);
  a.join();
  b.join();
  ASSERT_GE(waited[0], 0) << "could not pin thread 0";
  ASSERT_GE(waited[1], 0) << "could not pin thread 1";
  EXPECT_GT(waited[0] + waited[1], 0) << "two threads on one CPU, neither waited";
}

TEST(Straggler, JudgedOnFullWindowsAgainstTheLowerMedian) {
  // Not before every window is full.
  EXPECT_TRUE(find_stragglers({windowed(0.01, 4), windowed(0.08, 3)}, 1.5).empty());
  EXPECT_TRUE(find_stragglers({windowed(0.01, 4)}, 1.5).empty());
  // Two ranks: the faster is the baseline, so only the slower can be named.
  std::vector<StragglerFinding> f = find_stragglers({windowed(0.01, 4), windowed(0.08, 4)}, 1.5);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_DOUBLE_EQ(f[0].baseline_s, 0.01);
  EXPECT_EQ(f[0].step, 10);
  EXPECT_TRUE(find_stragglers({windowed(0.01, 4), windowed(0.014, 4)}, 1.5).empty());
  f = find_stragglers({windowed(0.05, 4), windowed(0.01, 4), windowed(0.011, 4), windowed(0.012, 4)}, 1.5);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rank, 0);
  EXPECT_DOUBLE_EQ(f[0].baseline_s, 0.011);
}

TEST(Hang, ProcessSamplesSeeAStoppedProcess) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  ::kill(child, SIGSTOP);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);  // stopped for sure from here on
  const ProcSample a = sample_process(child);
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.state, 'T');
  EXPECT_EQ(activity_between(a, sample_process(child)), 0);
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(sample_process(child).ok);
  EXPECT_TRUE(sample_process(int(::getpid())).ok);
}

TEST(Hang, ActivityBetweenSamples) {
  ProcSample a{true, 'S', 1000000, 10}, b = a;
  EXPECT_EQ(activity_between(a, b), 0);
  b.vcsw = 400;  // a poll loop
  EXPECT_EQ(activity_between(a, b), 1);
  b = a;
  b.cpu_ns += 5000000;  // a busy loop
  EXPECT_EQ(activity_between(a, b), 1);
  b = a;
  b.vcsw += 1;  // one stray wake-up tells nothing
  EXPECT_EQ(activity_between(a, b), -1);
  EXPECT_EQ(activity_between(ProcSample{}, b), -1);
}

namespace {
RankState rank_state(const std::string& stage, int64_t step, double hb_time, char state = 'S', int activity = -1) {
  RankState s;
  s.have = true;
  s.stage = stage;
  s.step = step;
  s.hb_time = hb_time;
  s.state = state;
  s.activity = activity;
  return s;
}
}  // namespace

TEST(Hang, AttributedToTheRankThatIsNotWaiting) {
  // Rank 1 stopped after its step-5 heartbeat, written after rank 0's: stopped beats stale.
  HangVerdict v = attribute_hang({rank_state("step", 5, 100.0, 'S', 1), rank_state("step", 5, 100.2, 'T', 0)});
  EXPECT_EQ(v.rank, 1);
  EXPECT_NE(v.cause.find("stopped"), std::string::npos);
  // Rank 1 blocked (no CPU, no wake-ups) while rank 0 polls a collective.
  v = attribute_hang({rank_state("step", 5, 100.0, 'S', 1), rank_state("step", 5, 100.2, 'S', 0)});
  EXPECT_EQ(v.rank, 1);
  EXPECT_NE(v.cause.find("rank(s) 0 poll"), std::string::npos);
  // Nothing tells the processes apart: the rank behind.
  v = attribute_hang({rank_state("step", 6, 100.0), rank_state("step", 5, 99.0), rank_state("eval", 6, 98.0)});
  EXPECT_EQ(v.rank, 1);
  EXPECT_NE(v.cause.find("behind: step 5"), std::string::npos);
  // A background save's checkpoint_done names an older step: no step comparison, stale first.
  v = attribute_hang({rank_state("step", 6, 100.0), rank_state("checkpoint_done", 5, 100.5)});
  EXPECT_EQ(v.rank, 0);
  EXPECT_EQ(v.cause, "its heartbeat went stale first");
  // A rank that never wrote a heartbeat.
  RankState none;
  v = attribute_hang({rank_state("start", 0, 100.0), none});
  EXPECT_EQ(v.rank, 1);
  EXPECT_NE(v.cause.find("never wrote"), std::string::npos);
  EXPECT_EQ(attribute_hang({rank_state("step", 3, 50.0)}).rank, 0);
  v = attribute_hang({none, none});
  EXPECT_EQ(v.rank, -1);
  EXPECT_EQ(v.cause, "no rank wrote a heartbeat");
}

TEST(Injector, NanAndSpikeFireOnceAcrossRestarts) {
  TempDir d("inj");
  const std::string rec = d / "faults.jsonl";
  std::vector<float> g(8, 1.0f);
  {
    FaultInjector inj(parse_faults("nan:step=2;spike:step=3,factor=10;nan:rank=1,step=2"), 0, rec, false);
    inj.after_backward(1, g.data(), g.size());
    EXPECT_TRUE(std::isfinite(g[4]));
    inj.after_backward(2, g.data(), g.size());
    EXPECT_TRUE(std::isnan(g[4]));
    g.assign(8, 1.0f);
    inj.after_backward(3, g.data(), g.size());
    EXPECT_FLOAT_EQ(g[0], 10.0f);
  }
  g.assign(8, 1.0f);
  FaultInjector again(parse_faults("nan:step=2;spike:step=3,factor=10"), 0, rec, true);
  again.after_backward(2, g.data(), g.size());
  again.after_backward(3, g.data(), g.size());
  EXPECT_FLOAT_EQ(g[4], 1.0f) << "a fired fault fires again after a restart";
  FaultInjector fresh(parse_faults("nan:step=2"), 0, rec, false);  // a fresh start clears the record
  fresh.after_backward(2, g.data(), g.size());
  EXPECT_TRUE(std::isnan(g[4]));
}

TEST(Injector, EnospcFailsTheNthWriteOfThatSaveOnly) {
  TempDir d("enospc");
  FaultInjector inj(parse_faults("enospc:step=4"), 0, d / "f.jsonl", false);
  std::vector<float> p(16, 1.0f);
  inj.on_stage("checkpoint", 2);  // another step's save: unaffected
  save_ckpt(d / "ckpt", 2, 1.0f);
  inj.on_stage("checkpoint_done", 2);
  inj.on_stage("checkpoint", 4);
  const std::string e = error_of([&] { save_ckpt(d / "ckpt", 4, 2.0f); });
  EXPECT_NE(e.find("No space left on device"), std::string::npos) << e;
  inj.on_stage("done", 4);
  EXPECT_FALSE(write_fault_hook());
  Checkpoint ck(d / "ckpt");
  EXPECT_EQ(ck.step(), 2);
  ck.verify();
  EXPECT_EQ(list_checkpoints(d / "ckpt").size(), 1u);
}

TEST(Rollback, FallsBackPastCorruptAndRollsBackBeforeAWindow) {
  TempDir d("rollback");
  const std::string root = d / "ckpt";
  save_ckpt(root, 5, 1.0f);
  save_ckpt(root, 10, 2.0f);
  const std::string newest = save_ckpt(root, 15, 3.0f);
  EXPECT_NE(corrupt_checkpoint(newest).find("params-r00000"), std::string::npos);
  EXPECT_NE(error_of([&] { Checkpoint(newest).verify(); }).find("checksum"), std::string::npos);
  ResumePoint r = choose_resume_point(root);
  EXPECT_EQ(r.step, 10);
  ASSERT_EQ(r.corrupt.size(), 1u);
  EXPECT_EQ(r.corrupt[0].first, 15);
  EXPECT_EQ(Checkpoint(root).step(), 10);  // latest rewritten
  EXPECT_EQ(list_checkpoints(root).size(), 2u);
  // Anomalies from step 8 on: only checkpoints before step 8 qualify.
  r = choose_resume_point(root, 8);
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.rolled_back, std::vector<int64_t>{10});
  EXPECT_EQ(Checkpoint(root).step(), 5);
  // Nothing usable: latest goes, the run starts from scratch.
  corrupt_checkpoint(root + "/step_00000005");
  r = choose_resume_point(root);
  EXPECT_TRUE(r.dir.empty());
  EXPECT_FALSE(fs::exists(root + "/latest"));
}
