// Fault tolerance units: fault spec parsing, the anomaly detector (NaN, z-score spikes,
// K consecutive -> abort), heartbeat records, checkpoint corruption and the supervisor's
// choice of a resume point. The end-to-end proofs are tests/ft_*.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "test_util.h"
#include "ft/anomaly.h"
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
      "hang:step=3,at=checkpoint;spike:step=6,factor=50;corrupt-ckpt");
  ASSERT_EQ(f.size(), 9u);
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
  EXPECT_EQ(fs::file_size(heartbeat_path(d / "hb", 3)), 384u);
  // A torn record (seq at the ends differ) is rejected.
  std::ofstream(d / "torn.json") << "{\"seq\":5,\"stage\":\"step\",\"seq2\":4}";
  EXPECT_FALSE(read_heartbeat(d / "torn.json", hb));
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
