// Routing health (train/router_health.h): the streak detector fed constructed load
// sequences, NaN loads, recovery and step gaps; the anomaly detector's router_collapse verdict
// (warning, or abort with the streak as the window); the [anomaly] run-config fields;
// bias_sign's damped rate. The
// end-to-end proof (a short training run that must stay balanced, the alarm in
// metrics.jsonl, the rollback under zaya launch) is tests/routing_health.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ft/anomaly.h"
#include "model/model.h"
#include "test_util.h"
#include "train/balancer.h"
#include "train/router_health.h"
#include "train/run_config.h"

using namespace zaya;

namespace {

LayerLoad load(double entropy, double skip) {
  LayerLoad l;
  l.entropy = entropy;
  l.skip_rate = skip;
  return l;
}

RouterHealthSettings settings(double min_entropy, double max_skip, int steps, bool rollback = false) {
  RouterHealthSettings s;
  s.min_entropy = min_entropy;
  s.max_skip = max_skip;
  s.steps = steps;
  s.rollback = rollback;
  return s;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST(RouterHealth, AlarmAfterNUnhealthyStepsInARow) {
  RouterHealthMonitor m(settings(0.5, 0.9, 3));
  // Layer 1 dips for 2 steps (no alarm), recovers, then stays low from step 5.
  const std::vector<double> e1 = {0.9, 0.4, 0.3, 0.9, 0.2, 0.1, 0.0, 0.0, 0.95};
  int alarms = 0, recovered = 0;
  for (int64_t s = 1; s <= int64_t(e1.size()); ++s) {
    RouterHealthEvents ev = m.observe(s, {load(0.99, 0.1), load(e1[size_t(s - 1)], 0.1)});
    for (const RouterAlarm& a : ev.alarms) {
      ++alarms;
      EXPECT_EQ(s, 7);  // steps 5, 6, 7 are three in a row
      EXPECT_EQ(a.layer, 1);
      EXPECT_EQ(a.first_step, 5);
      EXPECT_EQ(a.step, 7);
      EXPECT_EQ(a.steps, 3);
      EXPECT_DOUBLE_EQ(a.entropy, 0.0);
      EXPECT_FALSE(a.rollback);
    }
    if (s == 7) {
      EXPECT_EQ(m.alarmed(), 1);
    }
    for (const RouterAlarm& r : ev.recovered) {
      ++recovered;
      EXPECT_EQ(s, 9);
      EXPECT_EQ(r.layer, 1);
      EXPECT_EQ(r.first_step, 5);
      EXPECT_EQ(r.steps, 4);  // 5..8
    }
  }
  EXPECT_EQ(alarms, 1);  // once per streak, not at every step of it
  EXPECT_EQ(recovered, 1);
  EXPECT_EQ(m.alarmed(), 0);
}

TEST(RouterHealth, NaNAndSkipShareAreUnhealthy) {
  RouterHealthMonitor m(settings(0.5, 0.6, 2));
  EXPECT_FALSE(m.healthy(load(kNaN, 0.1)));
  EXPECT_FALSE(m.healthy(load(0.9, kNaN)));
  EXPECT_FALSE(m.healthy(load(0.9, 0.7)));
  EXPECT_FALSE(m.healthy(load(0.49, 0.1)));
  EXPECT_TRUE(m.healthy(load(0.5, 0.6)));  // the thresholds themselves are healthy
  EXPECT_TRUE(m.observe(1, {load(kNaN, 0.1), load(0.9, 0.97)}).alarms.empty());
  RouterHealthEvents ev = m.observe(2, {load(kNaN, 0.1), load(0.9, 0.97)});
  ASSERT_EQ(ev.alarms.size(), 2u);
  EXPECT_EQ(ev.alarms[0].layer, 0);
  EXPECT_TRUE(std::isnan(ev.alarms[0].entropy));
  EXPECT_EQ(ev.alarms[1].layer, 1);
  EXPECT_DOUBLE_EQ(ev.alarms[1].skip, 0.97);
  // With the entropy test off, a NaN entropy still counts as unhealthy.
  RouterHealthMonitor off(settings(0, 1, 1));
  EXPECT_FALSE(off.healthy(load(kNaN, 0.0)));
  EXPECT_TRUE(off.healthy(load(0.0, 1.0)));
}

TEST(RouterHealth, AGapInTheStepsEndsTheStreak) {
  RouterHealthMonitor m(settings(0.5, 0.9, 3));
  EXPECT_TRUE(m.observe(10, {load(0.1, 0.1)}).alarms.empty());
  EXPECT_TRUE(m.observe(11, {load(0.1, 0.1)}).alarms.empty());
  // Step 12 skipped (a skip window, a restart): the streak starts over at 13.
  EXPECT_TRUE(m.observe(13, {load(0.1, 0.1)}).alarms.empty());
  EXPECT_TRUE(m.observe(14, {load(0.1, 0.1)}).alarms.empty());
  RouterHealthEvents ev = m.observe(15, {load(0.1, 0.1)});
  ASSERT_EQ(ev.alarms.size(), 1u);
  EXPECT_EQ(ev.alarms[0].first_step, 13);
}

TEST(RouterHealth, AnomalyDetectorWarnsOrAbortsOnAnAlarm) {
  ft::AnomalyOptions o;
  o.max_consecutive = 5;
  ft::AnomalyDetector det(o);
  StepCheck c{40, 2.5, 1.0, true, std::nullopt};
  EXPECT_EQ(det.judge(c).verdict, StepVerdict::Update);
  c.step = 41;
  c.router = RouterAlarm{2, 22, 41, 20, 0.1, 0.3, false};
  ft::AnomalyDecision d = det.judge(c);
  EXPECT_EQ(d.kind, "router_collapse");
  EXPECT_EQ(d.verdict, StepVerdict::Update);  // a warning: the step itself is sound
  EXPECT_EQ(d.first_step, 22);
  EXPECT_EQ(det.anomalies(), 1);
  c.step = 42;
  c.router->rollback = true;
  d = det.judge(c);
  EXPECT_EQ(d.verdict, StepVerdict::Abort);  // at once: the streak was the patience
  EXPECT_EQ(d.first_step, 22);
  EXPECT_EQ(d.consecutive, 20);
  // A non-finite step is judged as one whatever the router says.
  c.step = 43;
  c.finite = false;
  EXPECT_EQ(det.judge(c).kind, "nonfinite");
}

TEST(RouterHealth, AnomalySectionOfTheRunConfig) {
  const std::string base =
      "[run]\nname = \"r\"\nout_dir = \"/nonexistent/r\"\n"
      "[model]\nconfig = \"" ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml\"\n"
      "[[data.sources]]\nname = \"a\"\ntrain = [\"a.bin\"]\n"
      "[[phases]]\nname = \"p\"\ntokens = 64\nseq_len = 16\n"
      "[batch]\nglobal_batch = 4\nmicro_batch = 2\n";
  RunConfig d = parse_run_config(base, "r.toml");
  EXPECT_DOUBLE_EQ(d.router_health.min_entropy, 0.5);
  EXPECT_DOUBLE_EQ(d.router_health.max_skip, 0.9);
  EXPECT_EQ(d.router_health.steps, 20);
  EXPECT_FALSE(d.router_health.rollback);
  RunConfig c = parse_run_config(
      base + "[anomaly]\nrouter_min_entropy = 0.7\nrouter_max_skip = 0.4\nrouter_steps = 5\nrouter_rollback = true\n",
      "r.toml");
  EXPECT_DOUBLE_EQ(c.router_health.min_entropy, 0.7);
  EXPECT_DOUBLE_EQ(c.router_health.max_skip, 0.4);
  EXPECT_EQ(c.router_health.steps, 5);
  EXPECT_TRUE(c.router_health.rollback);
  std::string e = test_util::error_of([&] { parse_run_config(base + "[anomaly]\nrouter_min_entropy = 1.5\n", "r.toml"); });
  EXPECT_NE(e.find("anomaly.router_min_entropy"), std::string::npos) << e;
  e = test_util::error_of([&] { parse_run_config(base + "[anomaly]\nrouter_steps = 0\n", "r.toml"); });
  EXPECT_NE(e.find("anomaly.router_steps"), std::string::npos) << e;
  e = test_util::error_of([&] { parse_run_config(base + "[anomaly]\nrouter_entropy = 0.5\n", "r.toml"); });
  EXPECT_NE(e.find("unknown field anomaly.router_entropy"), std::string::npos) << e;
}

// bias_sign's rate: sign_rate at first, halved where a class's load error flips sign, grown
// back by 1.2x (at most to sign_rate) while it keeps its sign.
TEST(RouterHealth, SignRateHalvesWhereAShareOvershoots) {
  ModelConfig cfg = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  Model<float> m(cfg);
  m.init(2);
  BalancerSettings s;
  s.method = BalanceMethod::BiasSign;
  s.sign_rate = 1e-2;
  RouterBalancer bal(m.layout, s);
  const int NC = cfg.num_classes();
  const size_t off = m.layout.sub[1].moe.router.balancing_bias;
  auto step = [&](int64_t expert0, int64_t others) {
    std::vector<std::vector<int64_t>> counts(size_t(bal.num_layers()), std::vector<int64_t>(size_t(NC), others));
    counts[0][0] = expert0;
    bal.clear_counts();
    bal.add_counts(counts);
    const float b0 = m.buffers[off], b1 = m.buffers[off + 1];
    bal.update(m.buffers.data());
    return std::pair<double, double>(m.buffers[off] - b0, m.buffers[off + 1] - b1);
  };
  auto [d0, d1] = step(100, 10);  // expert 0 over-loaded (100 of 140), expert 1 under (10)
  EXPECT_NEAR(d0, -1e-2, 1e-7);
  EXPECT_NEAR(d1, 1e-2, 1e-7);
  std::tie(d0, d1) = step(100, 10);  // the same signs keep the full rate
  EXPECT_NEAR(d0, -1e-2, 1e-7);
  EXPECT_NEAR(d1, 1e-2, 1e-7);
  std::tie(d0, d1) = step(1, 10);  // both overshoot: expert 0 under (1 of 41), expert 1 over
  EXPECT_NEAR(d0, 5e-3, 1e-7);
  EXPECT_NEAR(d1, -5e-3, 1e-7);
  std::tie(d0, d1) = step(1, 10);  // a steady sign grows the rate back by 1.2x
  EXPECT_NEAR(d0, 6e-3, 1e-7);
  EXPECT_NEAR(d1, -6e-3, 1e-7);
}

// follow_mean: each class's bias first moves against the change of the class's mean
// probability (from the uniform 1 / classes at the first update), then by the feedback step;
// with balanced loads (no feedback) only the drift moves it. Without follow_mean the means
// move nothing; with the reference unknown (-1, a resume from an older checkpoint) the first
// update only records the means.
TEST(RouterHealth, FollowMeanCancelsADriftOfTheClassMeans) {
  ModelConfig cfg = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  ASSERT_EQ(cfg.topk, 1);
  Model<float> m(cfg);
  m.init(2);
  const int NC = cfg.num_classes();
  const size_t off = m.layout.sub[1].moe.router.balancing_bias;
  const int64_t per_class = 10, tokens = per_class * NC;  // balanced: load error 0, no feedback
  auto step = [&](RouterBalancer& bal, const std::vector<double>& means) {
    std::vector<std::vector<int64_t>> counts(size_t(bal.num_layers()), std::vector<int64_t>(size_t(NC), per_class));
    std::vector<std::vector<double>> sums(size_t(bal.num_layers()), std::vector<double>(size_t(NC), 1.0 * tokens / NC));
    for (int e = 0; e < NC; ++e) sums[0][size_t(e)] = means[size_t(e)] * double(tokens);
    std::vector<float> before(m.buffers.begin() + ptrdiff_t(off), m.buffers.begin() + ptrdiff_t(off) + NC);
    bal.clear_counts();
    bal.add_counts(counts, sums);
    bal.update(m.buffers.data());
    std::vector<double> d(static_cast<size_t>(NC));
    for (int e = 0; e < NC; ++e) d[size_t(e)] = double(m.buffers[off + size_t(e)]) - before[size_t(e)];
    return d;
  };
  std::vector<double> mean0(static_cast<size_t>(NC), 1.0 / NC), mean1;
  mean0[0] += 0.1, mean0[1] -= 0.1;    // the first batch: class 0 above uniform, class 1 below
  mean1 = mean0;
  mean1[0] += 0.05, mean1[2] -= 0.05;  // the next: class 0 drifts up, class 2 down
  BalancerSettings s;
  s.method = BalanceMethod::BiasSign;
  s.sign_rate = 1e-2;
  s.follow_mean = true;
  RouterBalancer bal(m.layout, s);
  std::vector<double> d = step(bal, mean0);
  EXPECT_NEAR(d[0], -0.1, 1e-6);
  EXPECT_NEAR(d[1], 0.1, 1e-6);
  EXPECT_NEAR(d[2], 0.0, 1e-6);
  d = step(bal, mean1);
  EXPECT_NEAR(d[0], -0.05, 1e-6);
  EXPECT_NEAR(d[1], 0.0, 1e-6);
  EXPECT_NEAR(d[2], 0.05, 1e-6);
  EXPECT_NEAR(bal.p()[off], mean1[0], 1e-6);
  for (int e = 0; e < NC; ++e) EXPECT_TRUE(std::isfinite(d[size_t(e)])) << e;

  s.follow_mean = false;  // the means alone move nothing
  RouterBalancer plain(m.layout, s);
  for (double x : step(plain, mean0)) EXPECT_EQ(x, 0.0);

  s.follow_mean = true;  // an unknown reference: the first update records, the next follows
  RouterBalancer resumed(m.layout, s);
  std::fill_n(resumed.p().begin() + ptrdiff_t(off), NC, -1.f);
  for (double x : step(resumed, mean0)) EXPECT_EQ(x, 0.0);
  d = step(resumed, mean1);
  EXPECT_NEAR(d[0], -0.05, 1e-6);
  EXPECT_NEAR(d[2], 0.05, 1e-6);
}
