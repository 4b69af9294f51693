// zaya size calculators against hand-computed values for configs/zaya1-tiny.toml
// (D=32, V=96, hd=8, Hq=4, Hk=2, L=3, E=4 + skip, F=48, R=16, top-1, conv kernels 2 and 2).
// Layout for the hand computations: micro-batch 2 x seq 8 = 16 tokens, fp32, one rank.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/params.h"
#include "size/gemm_model.h"
#include "size/memory.h"
#include "size/step_time.h"
#include "size/workload.h"

using namespace zaya;
using namespace zaya::size;

namespace {

ModelConfig tiny() { return load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml"); }
ModelConfig base() { return load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-base.toml"); }

RunLayout tiny_run() {
  RunLayout r = RunLayout::for_dtype("fp32");
  r.micro_batch = 2;
  r.seq = 8;
  return r;
}

// A synthetic profile with round numbers: 1 TFLOP/s fp32, 50% GEMM efficiency, 4 compute
// units, one 16x16x8 tile, 100 GB/s, no kernel overhead.
HardwareProfile toy_profile() {
  HardwareProfile hw;
  hw.name = "toy";
  hw.source = "test";
  hw.peak_tflops = {{"fp32", 1.0}, {"bf16", 2.0}};
  hw.compute_units = 4;
  hw.gemm_efficiency = 0.5;
  hw.tiles = {{16, 16, 8, 1.0}};
  hw.memory_bandwidth_GBps = 100;
  hw.memory_efficiency = 1.0;
  hw.devices_per_node = 4;
  hw.intra = {10, 2};
  hw.inter = {1, 20};
  hw.validate();
  return hw;
}

const GemmOp& find(const Workload& w, const std::string& name) {
  for (auto& g : w.gemms)
    if (g.name == name) return g;
  throw std::runtime_error("no GEMM " + name);
}

}  // namespace

TEST(SizeCalc, ParamCountsOfTinyByHand) {
  ParamCounts c = count_params(tiny());
  // CCA core: q 32*32 + k 16*32 + v1,v2 2*8*32 + conv0 48*2+48 + conv1 48*8*2+48 + temp 2 + o 32*32.
  EXPECT_EQ(c.cca_core, 4034);
  EXPECT_EQ(c.expert, 48 * 32 + 32 * 24);  // 2304
  EXPECT_EQ(c.total, 44342);
  EXPECT_EQ(c.active, 44342 - 3 * 3 * 2304);
  EXPECT_EQ(c.total_with_embedding(), 44342 + 96 * 32);
}

TEST(SizeCalc, GemmListAndFlopsPerTokenOfTiny) {
  Workload w = build_workload(tiny(), tiny_run());
  EXPECT_EQ(w.tokens, 16);
  EXPECT_EQ(w.tokens_per_expert, 4);  // 16 tokens * top-1 / 4 experts
  const GemmOp& conv = find(w, "attn.conv_qk.1");
  EXPECT_EQ(conv.batch, 12);  // (Hq + Hk) groups x 2 taps
  EXPECT_EQ(conv.flops(), 3 * 2.0 * 16 * 8 * 8 * 12);
  const GemmOp& qk = find(w, "attn.qk^T");
  EXPECT_EQ(qk.M, 8);
  EXPECT_EQ(qk.N, 8);
  EXPECT_EQ(qk.K, 8);
  EXPECT_EQ(qk.batch, 8);  // b * Hq
  EXPECT_EQ(qk.flops(), 3 * 4096.0);  // causal: half of 2*8*8*8*8
  EXPECT_EQ(find(w, "experts.fc1").flops(), 3 * 49152.0);
  EXPECT_EQ(find(w, "experts.fc2").flops(), 3 * 24576.0);
  EXPECT_EQ(find(w, "router.mlp.4").N, 5);  // E + skip
  EXPECT_EQ(find(w, "lm_head").flops(), 98304.0);
  // Attention sub-layer 131072, MoE sub-layer 109056 FLOPs per micro-batch; x3 layers + LM head.
  EXPECT_EQ(w.forward_flops(), 818688.0);
  FlopsPerToken f = flops_per_token(w);
  EXPECT_DOUBLE_EQ(f.forward, 51168.0);
  EXPECT_DOUBLE_EQ(f.training, 153504.0);
  EXPECT_DOUBLE_EQ(f.training_hardware, 153504.0);
  EXPECT_DOUBLE_EQ(f.attention_quadratic, 1536.0);
  EXPECT_DOUBLE_EQ(f.router, 6624.0);
  EXPECT_DOUBLE_EQ(f.experts, 13824.0);
  EXPECT_DOUBLE_EQ(f.lm_head, 6144.0);
  EXPECT_DOUBLE_EQ(f.six_n_active, 6.0 * (23606 + 3072));
  RunLayout rc = tiny_run();
  rc.recompute = true;
  EXPECT_DOUBLE_EQ(flops_per_token(build_workload(tiny(), rc)).training_hardware, 4 * 51168.0);
  // Skip share: 25% of routing choices skip the experts, so each expert sees 3 tokens.
  RunLayout rs = tiny_run();
  rs.skip_share = 0.25;
  EXPECT_DOUBLE_EQ(build_workload(tiny(), rs).tokens_per_expert, 3.0);
}

TEST(SizeCalc, MemoryPerRankOfTinyByHand) {
  Workload w = build_workload(tiny(), tiny_run());
  MemoryPerRank m = memory_per_rank(w);
  EXPECT_DOUBLE_EQ(m.params.dense, 47414 - 27648);
  EXPECT_DOUBLE_EQ(m.params.experts, 27648);
  EXPECT_DOUBLE_EQ(m.weights, 47414 * 4.0);
  EXPECT_DOUBLE_EQ(m.gradients, 47414 * 4.0);
  EXPECT_DOUBLE_EQ(m.master_weights, 0.0);  // fp32: the weights are the master copy
  EXPECT_DOUBLE_EQ(m.optimizer, 47414 * 8.0);
  // Per token: attention 512 + 240*4 + 16 = 1488 B, MoE 512 + 384 + 40 + 544 + 4 = 1484 B,
  // head 256 + 256 + 384 = 896 B.
  EXPECT_DOUBLE_EQ(m.per_token.attention, 1488.0);
  EXPECT_DOUBLE_EQ(m.per_token.moe, 1484.0);
  EXPECT_DOUBLE_EQ(m.per_token.head, 896.0);
  EXPECT_DOUBLE_EQ(m.activations, 16 * (3 * (1488.0 + 1484.0) + 896.0));
  EXPECT_DOUBLE_EQ(m.comm_buffers, 47414 * 8.0);  // bucket holds the whole model: grads + weights
  EXPECT_DOUBLE_EQ(m.total(), 1294928.0);
  // bf16 with ZeRO-1 over 2 ranks and experts over 2: master and moments sharded.
  RunLayout r = RunLayout::for_dtype("bf16");
  r.micro_batch = 2;
  r.seq = 8;
  r.dp = 2;
  r.ep = 2;
  MemoryPerRank z = memory_per_rank(build_workload(tiny(), r));
  EXPECT_DOUBLE_EQ(z.params.experts, 13824);
  EXPECT_DOUBLE_EQ(z.params.sharded(), 19766 / 2.0 + 13824 / 1.0);
  EXPECT_DOUBLE_EQ(z.weights, (19766 + 13824) * 2.0);
  EXPECT_DOUBLE_EQ(z.master_weights, (9883 + 13824) * 4.0);
  EXPECT_DOUBLE_EQ(z.optimizer, (9883 + 13824) * 8.0);
  // Recompute keeps h and res per sub-layer plus one sub-layer's full set.
  RunLayout rr = tiny_run();
  rr.recompute = true;
  EXPECT_DOUBLE_EQ(memory_per_rank(build_workload(tiny(), rr)).activations,
                   16 * (2 * 3 * (128.0 + 128.0) + 1488.0 + 896.0));
}

TEST(SizeCalc, KvCacheCcaVersusMhaAndGqa) {
  KvCache t = kv_cache(tiny());
  EXPECT_EQ(t.cca, 2 * 2 * 8);
  EXPECT_EQ(t.mha, 2 * 4 * 8);
  KvCache b = kv_cache(base());
  EXPECT_EQ(b.cca, 512);   // 2 * Hk * hd per token per attention layer
  EXPECT_EQ(b.mha, 4096);  // 16-head MHA
  EXPECT_EQ(b.cca * 8, b.mha);
  EXPECT_EQ(b.gqa, 512);
  EXPECT_EQ(b.mqa, 256);
  EXPECT_EQ(b.cca_bytes_per_token(), 512 * 2 * 40);
  EXPECT_EQ(b.conv_state_values, 2 * 1280 + 2048);
}

TEST(SizeCalc, TileAndWaveQuantisationByHand) {
  HardwareProfile hw = toy_profile();
  // [16 x 32] x [32 x 32]: 1 x 2 tiles of 16x16 on 4 units = one wave half full;
  // efficiency 0.5 * 0.5; 32768 FLOP / 0.25 TFLOP/s = 131.072 ns (memory: 8192 B / 100 GB/s
  // = 81.92 ns; split-K by 2 fills the wave but pays 81.92 ns of partial sums).
  GemmTiming t = gemm_time(hw, "fp32", {16, 32, 32, 1});
  EXPECT_DOUBLE_EQ(t.tiles, 2);
  EXPECT_DOUBLE_EQ(t.waves, 1);
  EXPECT_DOUBLE_EQ(t.wave_quant, 0.5);
  EXPECT_DOUBLE_EQ(t.tile_quant, 1.0);
  EXPECT_DOUBLE_EQ(t.split_k, 1);
  EXPECT_NEAR(t.seconds, 131.072e-9, 1e-15);
  EXPECT_FALSE(t.memory_bound);
  // [20 x 16] x [16 x 16]: M pads to 32 (tile quantisation 20/32), 2 tiles in one wave.
  GemmTiming q = gemm_time(hw, "fp32", {20, 16, 16, 1});
  EXPECT_DOUBLE_EQ(q.tile_quant, 20.0 / 32);
  // 5 tiles on 4 units: 2 waves, 5/8 of the slots used.
  GemmTiming w = gemm_time(hw, "fp32", {80, 16, 64, 1});
  EXPECT_DOUBLE_EQ(w.tiles, 5);
  EXPECT_DOUBLE_EQ(w.waves, 2);
  EXPECT_DOUBLE_EQ(w.wave_quant, 5.0 / 8);
  // An outer product is memory-bound: [256 x 1] x [1 x 256] moves (256 + 256 + 65536) * 4 B
  // (2.64 us) against 2.10 us of compute at 1/8 K-tile use.
  GemmTiming m = gemm_time(hw, "fp32", {256, 256, 1, 1});
  EXPECT_TRUE(m.memory_bound);
  EXPECT_NEAR(m.seconds, 66048 * 4 / 100e9, 1e-15);
}

TEST(SizeCalc, CollectiveAlphaBeta) {
  HardwareProfile hw = toy_profile();
  // Reduce-scatter of 1 MB over 4 ranks (one node): 3 steps x 2 us + 3/4 * 1e6 B / 10 GB/s.
  EXPECT_NEAR(collective_seconds(hw, "reduce_scatter", 1e6, 4), 6e-6 + 75e-6, 1e-12);
  // All-reduce: 2(n-1) steps and factor 2(n-1)/n.
  EXPECT_NEAR(collective_seconds(hw, "all_reduce", 1e6, 4), 12e-6 + 150e-6, 1e-12);
  // 8 ranks leave the node: the inter-node link (1 GB/s, 20 us).
  EXPECT_NEAR(collective_seconds(hw, "all_gather", 8e6, 8), 7 * 20e-6 + 7.0 / 8 * 8e6 / 1e9, 1e-12);
  EXPECT_EQ(collective_seconds(hw, "all_gather", 8e6, 1), 0);
}

TEST(SizeCalc, StepTimeComponentsOfTinyByHand) {
  HardwareProfile hw = toy_profile();
  Workload w = build_workload(tiny(), tiny_run());
  StepPrediction p = predict_step(w, hw);
  // Forward memory-bound bytes per micro-batch, by hand (fp32, fp32 residual, N = 16):
  // merge+norm 12288 x 6, conv0 6144 x 3, q-k mean/norm/RoPE 10240 x 3, value shift 2048 x 3,
  // fused softmax stats 512 x 3, router 7104 x 3, dispatch/combine 12288 x 3, SwiGLU 4608 x 3,
  // embedding + final merge/norm 14336, loss 18432 = 235328 B; forward + 2x backward.
  EXPECT_NEAR(p.memops_s, 3 * 235328 / 100e9, 1e-15);
  EXPECT_EQ(p.kernel_overhead_s, 0);
  // Optimizer (fp32 AdamW, one rank): 47414 params x (2*4 + 2*8 + 4) B / 100 GB/s, plus
  // zeroing the 47414 fp32 gradients.
  EXPECT_NEAR(p.optimizer_s, 47414 * (28 + 4) / 100e9, 1e-15);
  EXPECT_EQ(p.zero_comm_s, 0);  // one rank
  // The step adds up.
  EXPECT_NEAR(p.micro_batch_s, p.gemm_forward_s + p.gemm_backward_s + p.memops_s, 1e-15);
  EXPECT_NEAR(p.step_s, p.micro_batch_s + p.optimizer_s, 1e-15);
  EXPECT_NEAR(p.tokens_per_s_per_device, 16 / p.step_s, 1e-6);
  EXPECT_NEAR(p.mfu, 153504.0 * 16 / p.step_s / 1e12, 1e-12);
  // Each GEMM's forward time is its call time x sub-layers; the LM head's backward is
  // the two transposed shapes.
  for (auto& g : p.gemms)
    if (g.name == "lm_head") {
      EXPECT_NEAR(g.forward_s, gemm_time(hw, "fp32", {16, 96, 32, 1}).seconds, 1e-15);
      EXPECT_NEAR(g.backward_s,
                  gemm_time(hw, "fp32", {16, 32, 96, 1}).seconds + gemm_time(hw, "fp32", {32, 96, 16, 1}).seconds,
                  1e-15);
    }
  // Two micro-batches per step double the compute, not the optimizer.
  RunLayout r2 = tiny_run();
  r2.grad_accum = 2;
  StepPrediction p2 = predict_step(build_workload(tiny(), r2), hw);
  EXPECT_NEAR(p2.step_s, 2 * p.micro_batch_s + p.optimizer_s, 1e-15);
  // ZeRO-1 over 2 ranks: reduce-scatter fp32 grads, all-gather fp32 weights (47414 params each).
  RunLayout rd = tiny_run();
  rd.dp = 2;
  StepPrediction pd = predict_step(build_workload(tiny(), rd), hw);
  const double dense = 19766 * 4.0, experts = 27648 * 4.0;
  EXPECT_NEAR(pd.zero_comm_s, 2 * (2e-6 + 0.5 * dense / 10e9) + 2 * (2e-6 + 0.5 * experts / 10e9), 1e-15);
  EXPECT_NEAR(pd.optimizer_s, ((47414 / 2.0) * 28 + 47414 * 4) / 100e9, 1e-15);
}

TEST(SizeCalc, DecodeBytesOfTinyByHand) {
  HardwareProfile hw = toy_profile();
  // Batch 1, context 8, bf16 weights and cache: attention weights 12518 x 2, KV 3 x 8 x 32 x 2,
  // router/norms 4016 x 2, one expert per layer 3 x 2304 x 2, LM head 3072 x 2.
  DecodePrediction d = predict_decode(tiny(), hw, 1, 8);
  EXPECT_DOUBLE_EQ(d.experts_touched, 1.0);
  EXPECT_DOUBLE_EQ(d.kv_bytes, 1536);
  EXPECT_DOUBLE_EQ(d.expert_weight_bytes, 13824);
  EXPECT_NEAR(d.bytes, 25036 + 1536 + 8032 + 13824 + 6144, 1e-9);
  // Two tokens with top-1 over 4 experts touch 4 * (1 - (3/4)^2) = 1.75 experts on average.
  EXPECT_DOUBLE_EQ(predict_decode(tiny(), hw, 2, 8).experts_touched, 1.75);
  // Bandwidth-bound at batch 1: at least bytes / bandwidth.
  EXPECT_GE(d.seconds, d.bytes / 100e9);
}

TEST(SizeCalc, LayoutErrorsNameTheFlag) {
  auto err = [](RunLayout r) {
    try {
      build_workload(tiny(), r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RunLayout r = tiny_run();
  r.ep = 3;
  EXPECT_NE(err(r).find("--ep 3"), std::string::npos);
  r = tiny_run();
  r.cp = 3;
  EXPECT_NE(err(r).find("--cp 3"), std::string::npos);
  r = tiny_run();
  r.dtype = "fp64";
  EXPECT_NE(err(r).find("fp64"), std::string::npos);
  r = tiny_run();
  r.attention = "fast";
  EXPECT_NE(err(r).find("--attention"), std::string::npos);
}

TEST(SizeCalc, ExpAndErfRatesBoundElementwiseOps) {
  HardwareProfile hw = toy_profile();
  Workload w = build_workload(tiny(), tiny_run());
  const double base = predict_step(w, hw).memops_s;
  // Only erf limited, at 1e6/s: the router's two GELUs (2 x 16 tokens x 16 = 512 erfs per
  // layer, forward and backward) replace their 7104 B forward and 14208 B backward passes.
  hw.elementwise.erf_f32_per_s = 1e6;
  EXPECT_NEAR(predict_step(w, hw).memops_s - base, 3 * ((512 / 1e6 - 7104 / 100e9) + (512 / 1e6 - 14208 / 100e9)),
              1e-12);
  SpecialCounts c{20, 30};
  ElementwiseRates r;
  r.exp_f32_per_s = 2;
  r.erf_f32_per_s = 3;
  EXPECT_DOUBLE_EQ(special_seconds(c, r), 10 + 10);
  EXPECT_DOUBLE_EQ(special_seconds(c, ElementwiseRates{}), 0);
}

TEST(SizeCalc, MeasuredOptimizerRatesAndKernelBandwidth) {
  HardwareProfile hw = toy_profile();
  Workload w = build_workload(tiny(), tiny_run());
  // AdamW at a measured 1e9 elements/s for every tensor size: 47414 parameters, plus zeroing
  // the fp32 gradients at the measured elementwise-kernel bandwidth (50 GB/s).
  hw.elementwise.adamw_rates = {{1, 1e9}, {1e6, 1e9}};
  hw.elementwise.kernels_GBps = 50;
  StepPrediction p = predict_step(w, hw);
  EXPECT_NEAR(p.optimizer_s, 47414 / 1e9 + 47414 * 4 / 50e9, 1e-15);
  // Elementwise ops run at the kernels' 50 GB/s instead of the 100 GB/s memory.
  EXPECT_NEAR(p.memops_s, 3 * 235328 / 50e9, 1e-15);
}
