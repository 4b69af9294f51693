// The inference path's own code against the model's functions. model/infer.cpp shares the
// model's steps (cca.h, moe.h) and keeps its own code only where speed asks for it: products
// over the stored weights, the decode team's split work, the value shift applied to x before
// val_proj2 (one read of val_proj2 per token), the grouped conv as one product per (row,
// group), the bf16 KV cache, every expert's fc1 then every fc2 with no barrier between,
// rows at different positions. Each sub-layer of InferDecoder (run_sublayer) is checked
// against cca_forward (over a decode cache) / moe_forward on the same random weights:
// prefill and single-token decode over a cache, batch 1 and more, one thread (a region per
// product) and the decode team of 2 and 3 threads.
//
// Tolerances, relative to the largest |output| of the reference (the worst measured in
// brackets, AVX512-BF16 without AMX):
//  - fp32 weights, fp32 cache: 1e-5 [5e-7]: the same math, summed in another order.
//  - fp32 weights, bf16 cache: 2e-2 [2.5e-3]: K and V rounded to bf16 (2^-9 relative).
//  - bf16 weights in place: 2e-2 [4.4e-3]: every product's input rounded to bf16, against the
//    model in fp32 over the same (bf16-valued) weights.
// MoE outputs are compared for the tokens whose routing is clear of a tie (the model's biased
// top-k margin above 1e-4 with fp32 weights, 5e-3 with bf16): a token near a tie may route
// either way under either rounding. Over each model, most tokens must be compared.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "core/rng.h"
#include "model/cca.h"
#include "model/infer.h"
#include "model/model.h"
#include "model/moe.h"
#include "check_util.h"
#include "test_util.h"

using namespace zaya;

namespace {

ModelConfig tiny() {  // head dim 8, two KV heads of two query heads each
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.init_std = 0.2;
  c.topk = 2;
  return c;
}

ModelConfig wide() {  // head dim 64 (the AVX-512 attention kernels), one KV head
  return test_util::small_zaya_config("infer-math-test", 128, 64, 2, 1, 96, 0.1);
}

// Random weights as fp32 (the model, and views of it) and as bf16 files used in place (with
// the model loaded from those files: the same bf16-valued weights in fp32).
struct Models {
  ModelConfig c;
  std::unique_ptr<Model<float>> f32, f32_of_bf16;
  std::unique_ptr<InferModel> in_f32, in_bf16;
  test_util::TempDir dir;
  Models(const ModelConfig& cfg, const char* tag) : c(cfg), dir("infer_math", tag) {
    f32 = std::make_unique<Model<float>>(c);
    randomize_for_checks(f32->layout, 17, f32->params.data(), f32->buffers.data());
    // The skip class's balancing bias back to 0 (randomize_for_checks favours it): most tokens
    // then reach the experts.
    if (c.use_mod)
      for (const ParamInfo& p : f32->layout.buffers.params) f32->buffers[p.offset + p.numel - 1] = 0.f;
    in_f32 = std::make_unique<InferModel>(c, WeightStore::from_model(*f32));
    save_hf_dir(dir.str(), *f32, DType::BF16, 0, false);
    f32_of_bf16 = std::make_unique<Model<float>>(c);
    load_hf_weights(dir.str(), *f32_of_bf16);
    in_bf16 = std::make_unique<InferModel>(c, open_hf_weights(dir.str()));
  }
};

Models& tiny_models() {
  static Models m(tiny(), "tiny");
  return m;
}
Models& wide_models() {
  static Models m(wide(), "wide");
  return m;
}

std::vector<float> normal(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  Philox r(seed, 3);
  for (auto& x : v) x = float(r.normal());
  return v;
}

// Largest |a - b| relative to the largest |b| over what was compared (+inf on any NaN or
// infinity: check_util.h).
using Diff = test_util::MaxError;

// The model's attention sub-layer s over its own decode cache, row by row or batched.
struct CcaRef {
  const Model<float>& m;
  int s;
  CcaCache<float> cache;
  CcaSaved<float> saved;
  CcaScratch<float> scratch;
  CcaRef(const Model<float>& model, int sub, int B, int max_len) : m(model), s(sub) { cache.init(m.cfg(), B, max_len); }
  std::vector<float> run(const float* x, int n) {
    const ModelConfig& c = m.cfg();
    saved.resize(c, cache.B, n);
    scratch.resize(c, cache.B, n);
    std::vector<float> out(size_t(cache.B) * n * c.hidden_size);
    cca_forward(out.data(), x, m.params.data(), m.layout.sub[size_t(s)].cca, c, CcaDims{cache.B, n, cache.len},
                m.rope(), saved, scratch, &cache);
    return out;
  }
};

// Chunks of n tokens per row (the first a prefill, then decode steps or continuations) of
// random x through attention sub-layer s of both, under `threads` threads.
double cca_vs_model(const Model<float>& ref, const InferModel& im, KvCacheDType kv, int s, int B,
                    const std::vector<int>& chunks, int threads) {
  const int D = ref.cfg().hidden_size;
  int total = 0;
  for (int n : chunks) total += n;
  CcaRef want(ref, s, B, total);
  InferDecoder dec(im, B, total, kv);
  Diff d;
  omp_set_num_threads(threads);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int n = chunks[i];
    const std::vector<float> x = normal(size_t(B) * n * D, 100 + i);
    std::vector<float> got(x.size());
    dec.run_sublayer(s, x.data(), n, got.data());
    const std::vector<float> ref_out = want.run(x.data(), n);
    d.add(got.data(), ref_out.data(), got.size());
  }
  return d.rel();
}

struct Case {
  int B;
  std::vector<int> chunks;
};
// Decode from the first token; prefill then decode steps; a continuation of 6 over a cache;
// 2 x 20 rows (more than the team's 32: a region per product, the blocked attention kernel).
const std::vector<Case> kCcaCases = {{1, {1, 1, 1}}, {1, {5, 1, 1, 1}}, {3, {4, 1, 1}}, {2, {3, 1, 6}}, {2, {20, 1}}};

void check_cca(Models& m, const char* name) {
  const int saved_threads = omp_get_max_threads();
  struct Variant {
    const char* what;
    const Model<float>* ref;
    const InferModel* im;
    KvCacheDType kv;
    double tol;
  };
  for (const Variant& v : {Variant{"fp32 weights, fp32 cache", m.f32.get(), m.in_f32.get(), KvCacheDType::F32, 1e-5},
                           Variant{"fp32 weights, bf16 cache", m.f32.get(), m.in_f32.get(), KvCacheDType::BF16, 2e-2},
                           Variant{"bf16 weights, bf16 cache", m.f32_of_bf16.get(), m.in_bf16.get(), KvCacheDType::BF16,
                                   2e-2}})
    for (int s : {0, 2})
      for (const Case& k : kCcaCases)
        for (int threads : {1, 2, 3}) {
          const double rel = cca_vs_model(*v.ref, *v.im, v.kv, s, k.B, k.chunks, threads);
          std::printf("%s, %s, sub-layer %d, B %d, first chunk %d, %d thread(s): %.1e\n", name, v.what, s, k.B,
                      k.chunks[0], threads, rel);
          EXPECT_LT(rel, v.tol) << name << ", " << v.what << ", sub-layer " << s << ", B " << k.B << ", first chunk "
                                << k.chunks[0] << ", " << threads << " thread(s)";
        }
  omp_set_num_threads(saved_threads);
}

// Rows at different positions (3 and 7 cached, each prefilled alone and copied in) fed
// together, against the model with each row alone over its own cache.
double ragged_vs_model(const Model<float>& ref, const InferModel& im, KvCacheDType kv, int threads) {
  const int D = ref.cfg().hidden_size, s = 0, L = 24;
  const int lens[2] = {3, 7};
  omp_set_num_threads(threads);
  InferDecoder rows(im, 2, L, kv);
  std::vector<std::unique_ptr<CcaRef>> want;
  for (int b = 0; b < 2; ++b) {
    const std::vector<float> x = normal(size_t(lens[b]) * D, 200 + b);
    std::vector<float> out(x.size());
    InferDecoder one(im, 1, L, kv);
    one.run_sublayer(s, x.data(), lens[b], out.data());
    rows.copy_row_from(one, 0, b);
    want.push_back(std::make_unique<CcaRef>(ref, s, 1, L));
    want.back()->run(x.data(), lens[b]);
  }
  Diff d;
  int i = 0;
  for (int n : {1, 4, 1}) {
    const std::vector<float> x = normal(size_t(2) * n * D, 300 + i++);
    std::vector<float> got(x.size());
    rows.run_sublayer(s, x.data(), n, got.data());
    for (int b = 0; b < 2; ++b) {
      const size_t off = size_t(b) * n * D;
      const std::vector<float> ref_out = want[size_t(b)]->run(x.data() + off, n);
      d.add(got.data() + off, ref_out.data(), ref_out.size());
    }
  }
  return d.rel();
}

// MoE sub-layer s (the mi-th MoE) over N = B * n random rows; r_prev random when mi > 0 (the
// EDA term). Outputs compared for tokens clear of a routing tie, and r for every token.
struct MoeCount {
  int compared = 0, routed = 0;  // tokens compared, slots the model sent to an expert
};
MoeCount check_moe_case(const Model<float>& ref, const InferModel& im, int s, int mi, int B, int n, int threads,
                   double tol, double clear_margin, const char* what) {
  const ModelConfig& c = ref.cfg();
  const int N = B * n, D = c.hidden_size, R = c.router_hidden, NC = c.num_classes(), K = c.topk;
  const std::vector<float> x = normal(size_t(N) * D, 400 + size_t(N));
  const std::vector<float> r_prev = normal(size_t(N) * R, 500 + size_t(N));
  const float* rp = mi > 0 ? r_prev.data() : nullptr;
  // The model.
  const MoeOffsets& o = ref.layout.sub[size_t(s)].moe;
  MoeSaved<float> saved;
  saved.resize(c, N);
  LocalExperts<float> experts(ExpertRange{0, c.num_experts}, c.num_layers);
  experts.resize(c, N * K);
  std::vector<float> want(size_t(N) * D);
  moe_forward(want.data(), x.data(), rp, ref.params.data(), ref.buffers.data() + o.router.balancing_bias, o, c, N, mi,
              saved, experts);
  // Inference.
  omp_set_num_threads(threads);
  InferDecoder dec(im, B, n);
  std::vector<float> got(want.size()), r(size_t(N) * R);
  dec.run_sublayer(s, x.data(), n, got.data(), rp, r.data());
  Diff out, rd;
  int compared = 0;
  const float* bias = ref.buffers.data() + o.router.balancing_bias;
  for (int i = 0; i < N; ++i) {
    int32_t choice[8];
    float gate[8];
    const double margin = route_token(&saved.prob_NE[size_t(i) * NC], bias, NC, K, c.use_mod ? c.num_experts : -1,
                                      choice, gate);
    if (margin < clear_margin) continue;
    out.add(&got[size_t(i) * D], &want[size_t(i) * D], size_t(D));
    ++compared;
  }
  rd.add(r.data(), saved.r_NR.data(), r.size());
  std::printf("%s, sub-layer %d, B %d, n %d, %d thread(s): out %.1e (%d of %d tokens), r %.1e\n", what, s, B, n,
              threads, out.rel(), compared, N, rd.rel());
  EXPECT_LT(out.rel(), tol) << what << ", sub-layer " << s << ", B " << B << ", n " << n << ", " << threads
                            << " thread(s)";
  EXPECT_LT(rd.rel(), tol) << what << " (router state r), sub-layer " << s << ", B " << B << ", n " << n;
  MoeCount count{compared, 0};
  for (int64_t e : saved.counts_E) count.routed += int(e);
  return count;
}

void check_moe(Models& m, const char* name) {
  const int saved_threads = omp_get_max_threads();
  const std::string f32 = std::string(name) + ", fp32 weights", b16 = std::string(name) + ", bf16 weights";
  int tokens = 0, compared_f32 = 0, compared_b16 = 0, routed = 0;
  // Decode (n 1, batch 1 and 3), prefill (n 6), and 2 x 20 rows (a region per product).
  for (auto [B, n] : {std::pair{1, 1}, std::pair{3, 1}, std::pair{1, 6}, std::pair{2, 20}})
    for (int threads : {1, 2, 3})
      for (auto [s, mi] : {std::pair{1, 0}, std::pair{3, 1}}) {
        tokens += B * n;
        const MoeCount f = check_moe_case(*m.f32, *m.in_f32, s, mi, B, n, threads, 1e-5, 1e-4, f32.c_str());
        const MoeCount h = check_moe_case(*m.f32_of_bf16, *m.in_bf16, s, mi, B, n, threads, 2e-2, 5e-3, b16.c_str());
        compared_f32 += f.compared;
        compared_b16 += h.compared;
        routed += f.routed;
      }
  EXPECT_GE(compared_f32, tokens * 9 / 10) << name << ": too few tokens clear of a routing tie to compare";
  EXPECT_GE(compared_b16, tokens * 6 / 10) << name << ": too few tokens clear of a routing tie to compare";
  EXPECT_GE(routed, tokens * m.c.topk / 2) << name << ": most slots must reach an expert (not the skip class)";
  omp_set_num_threads(saved_threads);
}

}  // namespace

TEST(InferMath, AttentionSublayerMatchesCcaForward) {
  check_cca(tiny_models(), "tiny");
  check_cca(wide_models(), "wide");
}

TEST(InferMath, RowsAtOwnPositionsMatchCcaForwardPerRow) {
  const int saved_threads = omp_get_max_threads();
  for (Models* m : {&tiny_models(), &wide_models()})
    for (int threads : {1, 2}) {
      const double f = ragged_vs_model(*m->f32, *m->in_f32, KvCacheDType::F32, threads);
      const double h = ragged_vs_model(*m->f32, *m->in_f32, KvCacheDType::BF16, threads);
      const double w = ragged_vs_model(*m->f32_of_bf16, *m->in_bf16, KvCacheDType::BF16, threads);
      std::printf("hidden %d, %d thread(s): fp32 %.1e, bf16 cache %.1e, bf16 weights %.1e\n", m->c.hidden_size,
                  threads, f, h, w);
      EXPECT_LT(f, 1e-5) << "hidden " << m->c.hidden_size << ", " << threads << " thread(s)";
      EXPECT_LT(h, 2e-2) << "hidden " << m->c.hidden_size << ", " << threads << " thread(s)";
      EXPECT_LT(w, 2e-2) << "hidden " << m->c.hidden_size << ", " << threads << " thread(s)";
    }
  omp_set_num_threads(saved_threads);
}

TEST(InferMath, MoeSublayerMatchesMoeForward) {
  check_moe(tiny_models(), "tiny");
  check_moe(wide_models(), "wide");
}

// Decode runs CCA's steps between the conv and the attention per (batch row, KV head) part
// (CcaPart), one task each: the parts together write what one call for all rows writes, bit
// for bit, rows at a shared or at their own positions (the norms aside: each part keeps its
// own block of them).
TEST(InferMath, CcaPartsTogetherEqualTheWholeCall) {
  const ModelConfig c = test_util::small_zaya_config("cca-parts-test", 64, 16, 8, 2, 96, 0.1);
  const int B = 2, T = 3, C = c.conv_channels(), Hk = c.num_kv_heads, hd = c.head_dim;
  const int QD = c.num_q_heads * hd, KD = Hk * hd, cap = 16, Tr = T + c.conv_kernel1 - 1;
  ASSERT_GT(Hk, 1);
  RopeTable rope;
  rope.build(c.rotary_dim(), cap, c.rope_theta);
  Philox r(11, 2);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = float(r.normal());
    return v;
  };
  const std::vector<float> conv = rnd(size_t(B) * Tr * C), p = rnd(size_t(B) * T * C), v = rnd(size_t(B) * T * KD);
  const std::vector<float> temp = rnd(size_t(Hk));
  const std::vector<int> own_pos = {5, 2};
  for (const int* row_pos0 : {static_cast<const int*>(nullptr), own_pos.data()}) {
    const CcaDims d{B, T, 4};
    std::vector<float> pre(size_t(B) * T * C), qk(pre.size()), norms(size_t(B) * T * (c.num_q_heads + Hk));
    std::vector<float> kc(size_t(B) * cap * KD), vc(kc.size());
    cca_qk_mean(pre.data(), conv.data(), p.data(), c, d);
    cca_qk_norm_rope(qk.data(), norms.data(), pre.data(), temp.data(), rope, c, d, row_pos0);
    cca_kv_append(kc.data(), vc.data(), cap, c, d, qk.data() + QD, C, v.data(), row_pos0);
    std::vector<float> pre2(pre.size()), qk2(qk.size()), norms2(norms.size()), kc2(kc.size()), vc2(vc.size());
    for (int b = 0; b < B; ++b)
      for (int g = 0; g < Hk; ++g) {
        const CcaPart part{b, g};
        cca_qk_mean(pre2.data(), conv.data(), p.data(), c, d, part);
        cca_qk_norm_rope(qk2.data(), norms2.data(), pre2.data(), temp.data(), rope, c, d, row_pos0, part);
        cca_kv_append(kc2.data(), vc2.data(), cap, c, d, qk2.data() + QD, C, v.data(), row_pos0, part);
      }
    EXPECT_EQ(pre, pre2);
    EXPECT_EQ(qk, qk2);
    EXPECT_EQ(kc, kc2);
    EXPECT_EQ(vc, vc2);
  }
}
