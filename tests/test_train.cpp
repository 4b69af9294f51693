// Training: run config strictness, schedules and the step plan, optimizer sharding,
// exact resume across a phase switch, router balancing on a skewed router, data errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "test_util.h"
#include "core/rng.h"
#include "model/model.h"
#include "train/balancer.h"
#include "train/optim.h"
#include "train/run_config.h"
#include "train/schedule.h"
#include "data/shard.h"
#include "train/trainer.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

const std::string kTiny = ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml";

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("train", tag) {}
};

using test_util::error_of;

// Two token sources for the tiny model (vocab 96): "a" cycles through a pattern with a
// little noise (learnable), "b" is uniform noise.
void write_sources(const TempDir& d) {
  Philox rng(3, 4);
  std::vector<uint32_t> a(6000), b(6000), v(800);
  for (size_t i = 0; i < a.size(); ++i) a[i] = rng.uniform() < 0.9 ? uint32_t(i % 40) : uint32_t(rng.below(96));
  for (auto& t : b) t = uint32_t(rng.below(96));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint32_t(i % 40);
  write_shard(d / "a_train.bin", a, 96);
  write_shard(d / "b_train.bin", b, 96);
  write_shard(d / "a_val.bin", v, 96);
}

// Phase 1: 3 steps of 4 x 16 on source a at RoPE 1e4; phase 2: 3 steps of 4 x 32 on a+b at 1e6.
std::string run_toml(const TempDir& d, const std::string& optimizer = "muon", const std::string& extra = "") {
  return cat("[run]\nname = \"t\"\nout_dir = \"", d / "out", "\"\nseed = 7\n",
             "[model]\nconfig = \"", kTiny, "\"\n",
             "[[data.sources]]\nname = \"a\"\ntrain = [\"", d / "a_train.bin", "\"]\nval = [\"", d / "a_val.bin", "\"]\n",
             "[[data.sources]]\nname = \"b\"\ntrain = [\"", d / "b_train.bin", "\"]\n",
             "[[phases]]\nname = \"short\"\ntokens = 192\nseq_len = 16\nrope_theta = 10000.0\nmixture = { a = 1.0 }\n",
             "[[phases]]\nname = \"long\"\ntokens = 384\nseq_len = 32\nrope_theta = 1e6\nmixture = { a = 0.5, b = 0.5 }\n",
             "[batch]\nglobal_batch = 4\nmicro_batch = 2\n",
             "[optimizer]\nkind = \"", optimizer, "\"\nlr = 1e-2\ngrad_clip = 1.0\n",
             "[schedule]\nkind = \"cosine\"\nwarmup_steps = 2\n",
             "[balancing]\nmethod = \"bias_adamw\"\nlr = 1e-2\n",
             "[eval]\ninterval = 0\nwindows = 4\nbatch = 2\n",
             "[checkpoint]\ninterval = 0\nkeep_last = 2\n", extra);
}

TrainerOptions quiet(int64_t stop = -1, bool resume = false) {
  TrainerOptions o;
  o.stop_step = stop;
  o.resume = resume;
  return o;
}

}  // namespace

TEST(RunConfig, ParsesTheTestRecipe) {
  TempDir d("parse");
  RunConfig c = parse_run_config(run_toml(d), "t.toml");
  EXPECT_EQ(c.sources.size(), 2u);
  ASSERT_EQ(c.phases.size(), 2u);
  EXPECT_EQ(c.phases[1].seq_len, 32);
  EXPECT_DOUBLE_EQ(c.phases[1].rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.phases[0].weights[1], 0.0);
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::Muon);
  EXPECT_EQ(c.model.vocab_size, 96);
  TrainPlan p = c.plan();
  EXPECT_EQ(p.total_steps(), 6);
  EXPECT_EQ(p.phase_first_step(1), 3);
  EXPECT_EQ(p.at(3).seq_len, 32);
  EXPECT_TRUE(p.at(3).phase_start);
  EXPECT_EQ(p.total_tokens(), 192u + 384u);
}

TEST(RunConfig, BadConfigsAreOneLineErrorsNamingTheField) {
  TempDir d("bad");
  const std::string good = run_toml(d);
  auto err = [&](const std::string& text) { return error_of([&] { parse_run_config(text, "bad.toml"); }); };
  EXPECT_NE(err(good + "[typo]\nx = 1\n").find("unknown field typo"), std::string::npos);
  std::string e = err(good + "[log]\nintervall = 3\n");
  EXPECT_NE(e.find("unknown field log.intervall"), std::string::npos) << e;
  e = err(std::string(good).replace(good.find("lr = 1e-2"), 9, "lr = -1.0"));
  EXPECT_NE(e.find("field optimizer.lr"), std::string::npos) << e;
  e = err(std::string(good).replace(good.find("kind = \"muon\""), 13, "kind = \"sgd\""));
  EXPECT_NE(e.find("optimizer.kind must be one of adamw | muon"), std::string::npos) << e;
  e = err(std::string(good).replace(good.find("{ a = 1.0 }"), 11, "{ c = 1.0 }"));
  EXPECT_NE(e.find("unknown field phases[0].mixture.c"), std::string::npos) << e;
  e = err(std::string(good).replace(good.find("seq_len = 32"), 12, "seq_len = 4096"));
  EXPECT_NE(e.find("phases[1].seq_len must be in"), std::string::npos) << e;
  e = err(std::string(good).replace(good.find("micro_batch = 2"), 15, "micro_batch = 3"));
  EXPECT_NE(e.find("batch.global_batch"), std::string::npos) << e;
  e = err(good + "[run]\n");
  EXPECT_NE(e.find("bad.toml"), std::string::npos) << e;  // TOML syntax error (table redefined)
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  e = error_of([&] { load_run_config(d / "missing.toml"); });
  EXPECT_NE(e.find("missing.toml"), std::string::npos) << e;
}

TEST(TrainerData, MissingAndCorruptShardsNameTheFile) {
  TempDir d("shards");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d), "t.toml");
  fs::remove(d / "b_train.bin");
  std::string e = error_of([&] { Trainer t(c, quiet()); });
  EXPECT_NE(e.find("b_train.bin"), std::string::npos) << e;
  std::ofstream(d / "b_train.bin", std::ios::binary) << "ZAYATOK9 not a shard at all, just text......................";
  e = error_of([&] { Trainer t(c, quiet()); });
  EXPECT_NE(e.find("b_train.bin"), std::string::npos) << e;
}

TEST(Schedule, WarmupCosineWsdAndRamp) {
  LrSchedule s;
  s.peak_lr = 1.0;
  s.min_lr_ratio = 0.1;
  s.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(s.at(0, 110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9, 110), 1.0);
  EXPECT_NEAR(s.at(60, 110), 0.55, 1e-12);  // half way through the cosine
  EXPECT_NEAR(s.at(110, 110), 0.1, 1e-12);
  s.kind = LrScheduleKind::WSD;
  s.decay_fraction = 0.2;
  EXPECT_DOUBLE_EQ(s.at(80, 110), 1.0);     // stable
  EXPECT_NEAR(s.at(100, 110), 0.55, 1e-12);  // half way through the decay
  BatchRamp r{0.25, 1000};
  EXPECT_EQ(r.batch_at(64, 0, 8), 16);
  EXPECT_EQ(r.batch_at(64, 500, 8), 40);
  EXPECT_EQ(r.batch_at(64, 5000, 8), 64);
  TrainPlan p({{"a", 4000, 10, 64}}, r, 8);
  EXPECT_EQ(p.at(0).global_batch, 16);
  EXPECT_EQ(p.at(p.total_steps() - 1).global_batch, 64);
  EXPECT_GE(p.total_tokens(), 4000u);
  EXPECT_EQ(clip_factor(2.0, 1.0) < 0.5000001, true);
  EXPECT_EQ(clip_factor(0.5, 1.0), 1.0);
}

TEST(Optimizer, ShardedStepsEqualOneStep) {
  // ZeRO-1: stepping two ranges that keep Muon matrices whole gives the one-range result.
  Model<float> m(load_model_config(kTiny));
  m.init(1);
  Philox rng(9, 9);
  for (auto& g : m.grads) g = float(rng.normal() * 1e-2);
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Muon}) {
    OptimizerSettings s;
    s.kind = kind;
    std::vector<float> whole = m.params, split = m.params;
    Optimizer one(m.layout.params, s);
    one.step(whole.data(), m.grads.data(), 1e-2);
    auto ranges = shard_ranges(m.layout.params, 2, true);
    ASSERT_EQ(ranges.size(), 2u);
    EXPECT_EQ(ranges[0].end, ranges[1].begin);
    for (const FlatRange& r : ranges) {
      Optimizer part(m.layout.params, s, r);
      part.step(split.data(), m.grads.data(), 1e-2);
    }
    EXPECT_EQ(whole, split) << optimizer_kind_name(kind);
  }
}

TEST(Trainer, ExactResumeAcrossAPhaseSwitch) {
  TempDir d("resume");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d), "t.toml");
  std::vector<double> straight;
  std::vector<float> params, buffers, m1;
  {
    c.out_dir = d / "straight";
    c.ckpt_dir = d / "straight/ckpt";
    Trainer t(c, quiet());
    t.run();
    EXPECT_EQ(t.step(), 6);
    params = t.model().params;
    buffers = t.model().buffers;
    m1 = t.optimizer().m();
  }
  ASSERT_TRUE(fs::exists(d / "straight/metrics.jsonl"));
  // Reread the straight losses from metrics.jsonl.
  {
    std::ifstream in(d / "straight/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["type"] == "step") straight.push_back(j["loss"].get<double>());
    }
  }
  ASSERT_EQ(straight.size(), 6u);
  EXPECT_LT(straight[2], straight[0]);  // phase 1 learns source a's pattern
  for (int stop : {3, 4}) {  // at the phase boundary, and inside phase 2
    SCOPED_TRACE(stop);
    c.out_dir = d / cat("split", stop);
    c.ckpt_dir = d / cat("split", stop, "/ckpt");
    {
      Trainer t(c, quiet(stop));
      t.run();
      EXPECT_EQ(t.step(), stop);
    }
    std::vector<double> resumed;
    TrainerHooks hooks;
    hooks.on_step = [&](const StepRecord& r) { resumed.push_back(r.loss); };
    Trainer t(c, quiet(-1, true), hooks);
    EXPECT_EQ(t.step(), stop);
    t.run();
    ASSERT_EQ(resumed.size(), size_t(6 - stop));
    for (int i = stop; i < 6; ++i) EXPECT_EQ(resumed[size_t(i - stop)], straight[size_t(i)]) << "step " << i + 1;
    EXPECT_EQ(t.model().params, params);
    EXPECT_EQ(t.model().buffers, buffers);
    EXPECT_EQ(t.optimizer().m(), m1);
    EXPECT_DOUBLE_EQ(t.model().cfg().rope_theta, 1e6);  // phase 2's RoPE base
  }
}

// bf16 (the master weights split in place between steps, model/split_master.h, and plain in
// the checkpoint): a run stopped and resumed inside phase 2 gives the uninterrupted run's
// losses, weights and optimizer state bit for bit.
TEST(Trainer, Bf16ExactResume) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512-BF16 / AMX";
  test_util::PrecisionScope restore(gemm_settings().precision);  // the trainer sets bf16
  TempDir d("resume16");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d), "t.toml");
  c.bf16 = true;
  std::vector<double> straight, resumed;
  std::vector<float> params, m1;
  {
    c.out_dir = d / "straight";
    c.ckpt_dir = d / "straight/ckpt";
    TrainerHooks hooks;
    hooks.on_step = [&](const StepRecord& r) { straight.push_back(r.loss); };
    Trainer t(c, quiet(), hooks);
    t.run();
    params = t.model().params;
    m1 = t.optimizer().m();
  }
  ASSERT_EQ(straight.size(), 6u);
  c.out_dir = d / "split";
  c.ckpt_dir = d / "split/ckpt";
  {
    Trainer t(c, quiet(4));
    t.run();
  }
  TrainerHooks hooks;
  hooks.on_step = [&](const StepRecord& r) { resumed.push_back(r.loss); };
  Trainer t(c, quiet(-1, true), hooks);
  EXPECT_EQ(t.step(), 4);
  t.run();
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0], straight[4]);
  EXPECT_EQ(resumed[1], straight[5]);
  EXPECT_EQ(t.model().params, params);
  EXPECT_EQ(t.optimizer().m(), m1);
  EXPECT_TRUE(t.model().params_bf16.empty());  // no second copy of the weights
}

TEST(Trainer, PhaseSwitchChangesLengthMixtureAndRope) {
  TempDir d("phase");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d, "adamw"), "t.toml");
  Trainer t(c, quiet());
  std::vector<StepRecord> recs;
  for (int i = 0; i < 6; ++i) {
    recs.push_back(t.train_step());
    if (i == 2) {
      EXPECT_EQ(t.loader().seq_len(), 16);
      EXPECT_EQ(t.loader().samples_from(1), 0u);  // phase 1 draws from "a" only
      EXPECT_DOUBLE_EQ(t.model().cfg().rope_theta, 1e4);
    }
  }
  EXPECT_EQ(recs[2].seq_len, 16);
  EXPECT_EQ(recs[3].seq_len, 32);
  EXPECT_EQ(recs[3].phase, 1);
  EXPECT_EQ(t.loader().seq_len(), 32);
  EXPECT_GT(t.loader().samples_from(1), 0u);  // phase 2 mixes in "b"
  EXPECT_DOUBLE_EQ(t.model().cfg().rope_theta, 1e6);
  EXPECT_EQ(t.tokens(), 192u + 384u);
  EvalRecord e = t.evaluate();
  EXPECT_TRUE(std::isfinite(e.loss));
  EXPECT_EQ(e.tokens, 4 * 32);
}

TEST(Balancer, MovesASkewedRouterTowardUniform) {
  ModelConfig cfg = load_model_config(kTiny);
  Model<float> m(cfg);
  m.init(2);
  // Skew every router toward expert 0: a constant positive part in the last hidden layer
  // (its bias) times a pushed-up row 0 of the output layer, with the output layer scaled
  // up so routing also varies from token to token.
  // The skew is sized for router weights of std 0.02: the init's 1 / sqrt(R) scaled back.
  for (const SublayerOffsets& so : m.layout.sub) {
    if (so.attention) continue;
    const int R = cfg.router_hidden, NC = cfg.num_classes();
    const float to_std0 = float(cfg.init_std * std::sqrt(double(R)));
    for (size_t w : {so.moe.router.mlp0_w, so.moe.router.mlp2_w})
      for (int i = 0; i < R * R; ++i) m.params[w + size_t(i)] *= to_std0;
    for (int i = 0; i < R * NC; ++i) m.params[so.moe.router.mlp4_w + size_t(i)] *= to_std0;
    for (int i = 0; i < R; ++i) m.params[so.moe.router.mlp2_b + size_t(i)] = 0.5f;
    for (int i = 0; i < R * NC; ++i) m.params[so.moe.router.mlp4_w + size_t(i)] *= 30.f;
    for (int i = 0; i < R; ++i) m.params[so.moe.router.mlp4_w + size_t(i)] += 0.1f;
  }
  BalancerSettings s;  // bias_adamw, betas (0.9, 0.999)
  s.lr = 1e-2;
  RouterBalancer bal(m.layout, s), stats(m.layout, s);
  Philox rng(1, 2);
  const int B = 8, T = 32;
  std::vector<int32_t> ids(size_t(B * T)), probe(size_t(B * T));
  for (auto& x : probe) x = int32_t(rng.below(uint64_t(cfg.vocab_size)));
  auto measure = [&](double* max_rel, double* entropy) {  // mean over the MoE layers, on a fixed batch
    m.forward(probe.data(), nullptr, B, T);
    stats.clear_counts();
    stats.add_counts(m.class_counts());
    stats.compute_loads();
    *max_rel = *entropy = 0;
    for (const LayerLoad& l : stats.loads()) *max_rel += l.max_rel / stats.num_layers(), *entropy += l.entropy / stats.num_layers();
  };
  double max0, h0, max1, h1;
  measure(&max0, &h0);
  for (int it = 0; it < 100; ++it) {
    for (auto& x : ids) x = int32_t(rng.below(uint64_t(cfg.vocab_size)));
    m.forward(ids.data(), nullptr, B, T);
    bal.clear_counts();
    bal.add_counts(m.class_counts());
    bal.update(m.buffers.data());
  }
  measure(&max1, &h1);
  EXPECT_GT(max0, 3.5);  // skewed: expert 0 takes (nearly) every token of 4 experts
  EXPECT_LT(max1, 0.75 * max0) << max0 << " -> " << max1;
  EXPECT_GT(h1, h0 + 0.3) << h0 << " -> " << h1;
}

TEST(Balancer, SignUpdateLowersOverloadedAndRaisesUnderloadedBiases) {
  ModelConfig cfg = load_model_config(kTiny);
  Model<float> m(cfg);
  m.init(2);
  BalancerSettings s;
  s.method = BalanceMethod::BiasSign;
  s.sign_rate = 1e-3;
  RouterBalancer bal(m.layout, s);
  const int NC = cfg.num_classes();
  std::vector<std::vector<int64_t>> counts(size_t(bal.num_layers()), std::vector<int64_t>(size_t(NC), 10));
  counts[0][0] = 100;  // layer 0: expert 0 over-loaded, the rest under
  std::vector<float> before = m.buffers;
  bal.add_counts(counts);
  bal.update(m.buffers.data());
  const size_t off = m.layout.sub[1].moe.router.balancing_bias;
  EXPECT_FLOAT_EQ(m.buffers[off], before[off] - 1e-3f);
  for (int e = 1; e < NC; ++e) EXPECT_FLOAT_EQ(m.buffers[off + size_t(e)], before[off + size_t(e)] + 1e-3f);
  EXPECT_NEAR(bal.loads()[0].max_frac, 100.0 / 130.0, 1e-12);
  EXPECT_NEAR(bal.loads()[0].skip_rate, 10.0 / 140.0, 1e-12);
}

TEST(Balancer, AuxLossMethodTurnsOnTheSwitchLoss) {
  TempDir d("aux");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d, "adamw"), "t.toml");
  c.balancing.method = BalanceMethod::AuxLoss;
  c.balancing.aux_coeff = 0.01;
  Trainer t(c, quiet());
  std::vector<float> before = t.model().buffers;
  StepRecord r = t.train_step();
  EXPECT_GT(r.aux_loss, 0.0);
  EXPECT_EQ(t.model().buffers, before);  // no bias update with the aux loss
}

TEST(RunConfig, ShippedRecipesParse) {
  // Recipes name paths relative to the repository root (where `make` runs).
  struct Cwd {
    fs::path old = fs::current_path();
    Cwd() { fs::current_path(ZAYA_SOURCE_DIR); }
    ~Cwd() { fs::current_path(old); }
  } cwd;
  RunConfig base = load_run_config(ZAYA_SOURCE_DIR "/configs/recipes/zaya1-base.toml");
  ASSERT_EQ(base.phases.size(), 3u);
  EXPECT_EQ(base.phases[0].seq_len, 4096);
  EXPECT_DOUBLE_EQ(base.phases[1].rope_theta, 1e4);
  EXPECT_EQ(base.phases[2].seq_len, 32768);
  EXPECT_DOUBLE_EQ(base.phases[2].rope_theta, 1e6);
  EXPECT_EQ(base.model.max_position_embeddings, 32768);  // [model] override over configs/zaya1-base.toml
  EXPECT_EQ(base.model.hidden_size, 2048);
  EXPECT_NE(base.phases[0].weights, base.phases[1].weights);  // the mixture changes
  TrainPlan p = base.plan();
  EXPECT_GE(p.total_tokens(), 13'200'000'000'000ull);
  EXPECT_EQ(p.at(0).global_batch, 256);  // the batch ramp starts at a quarter
  EXPECT_EQ(p.at(p.phase_first_step(2)).seq_len, 32768);
  RunConfig demo = load_run_config(ZAYA_SOURCE_DIR "/configs/recipes/demo.toml");
  EXPECT_EQ(demo.phases.size(), 2u);
  EXPECT_EQ(demo.optimizer.kind, OptimizerKind::Muon);
}

// Background saves snapshot the step's state: the checkpoint they write is the one a
// synchronous save writes (same slices, same bytes), training goes on meanwhile, and a
// resume from it is exact. Every 2 steps of 6: steps 2 and 4 async, 6 (the end) sync.
TEST(Trainer, AsyncCheckpointsEqualSynchronousOnes) {
  TempDir d("async");
  write_sources(d);
  RunConfig c = parse_run_config(run_toml(d), "t.toml");
  c.ckpt_interval = 2;
  c.keep_last = 5;
  std::map<std::string, std::string> sums[2];  // step dir/tensor/slice start -> xxh3
  for (int async = 0; async < 2; ++async) {
    c.ckpt_async = async == 1;
    c.out_dir = d / cat("run", async);
    c.ckpt_dir = d / cat("run", async, "/ckpt");
    Trainer t(c, quiet());
    t.run();
    EXPECT_EQ(t.step(), 6);
    const auto steps = list_checkpoints(c.ckpt_dir);
    ASSERT_EQ(steps.size(), 3u);
    for (const std::string& s : steps) {
      Checkpoint ck(s);
      ck.verify();
      for (const auto& tensor : ck.tensors())
        for (const auto& sl : tensor.slices)
          sums[async][cat(fs::path(s).filename().string(), "/", tensor.name, "/", sl.start)] = hex64(sl.xxh3);
    }
    // metrics.jsonl records the stall of every save.
    std::ifstream in(fs::path(c.out_dir) / "metrics.jsonl");
    std::string line;
    int saves = 0;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["type"] == "checkpoint") {
        ++saves;
        EXPECT_GE(j["stall_s"].get<double>(), 0.0);
        EXPECT_GT(j["write_s"].get<double>(), 0.0);
      }
    }
    EXPECT_EQ(saves, 3);
  }
  EXPECT_EQ(sums[0].size(), sums[1].size());
  EXPECT_EQ(sums[0], sums[1]);
}
