// Inference on quantized directories (zaya quantize, then model/infer.h): prefill +
// incremental decode equals one pass over the same tokens; batched rows equal batch-1 rows;
// the bf16 KV cache against fp32; the quantized logits near the bf16 model's; generate runs
// a quantized directory and refuses --fp32 on it.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <filesystem>

#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "core/rng.h"
#include "kernels/linear_quant.h"
#include "model/infer.h"
#include "quant/convert/quantize_model.h"
#include "check_util.h"
#include "test_util.h"

using namespace zaya;
using quant::QType;

namespace {

ModelConfig cfg256() {
  ModelConfig c = parse_model_config_toml(R"(
name = "quant-infer-test"
model_type = "zaya"
hidden_size = 256
vocab_size = 300
num_attention_heads = 4
cca_num_q_heads = 2
num_query_groups_list = 1
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 512
zaya_mlp_expansion = 16
moe_router_topk = 2
zaya_use_mod = true
zaya_use_eda = true
partial_rotary_factor = 0.5
max_position_embeddings = 256
)",
                                          "quant-infer-test");
  c.init_std = 0.05;
  return c;
}

struct Dirs {
  test_util::TempDir root{"quant_infer", "models"};
  std::string bf16 = root / "bf16", q8 = root / "q8_0", q4k = root / "q4_k";
  Dirs() {
    Model<float> m(cfg256());
    randomize_for_checks(m.layout, 11, m.params.data(), m.buffers.data());
    save_hf_dir(bf16, m, DType::BF16, 0, false);
    test_util::write_byte_tokenizer(bf16);
    for (auto [t, d] : {std::pair{QType::Q8_0, q8}, std::pair{QType::Q4_K, q4k}}) {
      QuantizeOptions o;
      o.type = t;
      o.progress = false;
      quantize_model(bf16, d, o);
    }
  }
};
const Dirs& dirs() {
  static Dirs d;
  return d;
}

std::vector<int32_t> ids(int n, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  Philox r(seed, 1);
  for (auto& x : v) x = int32_t(r.below(300));
  return v;
}

// Logits of positions [P-1, T) by prefill of P tokens then single steps.
std::vector<std::vector<float>> incremental(const InferModel& m, const std::vector<int32_t>& t, int P, KvCacheDType kv) {
  InferDecoder d(m, 1, int(t.size()), kv);
  std::vector<std::vector<float>> out;
  const int V = m.cfg().vocab_size;
  const float* z = d.feed(t.data(), P);
  out.emplace_back(z, z + V);
  for (size_t i = size_t(P); i < t.size(); ++i) {
    z = d.feed(&t[i], 1);
    out.emplace_back(z, z + V);
  }
  out.pop_back();  // the logits after the last token: no one-pass row to compare with
  return out;
}

// The same positions from one pass over all tokens.
std::vector<std::vector<float>> one_pass(const InferModel& m, const std::vector<int32_t>& t, int P, KvCacheDType kv) {
  InferDecoder d(m, 1, int(t.size()), kv);
  std::vector<std::vector<float>> out;
  d.feed_all_logits(t.data(), int(t.size()) - 1, [&](int r, const float* z) {
    if (r >= P - 1) out.emplace_back(z, z + m.cfg().vocab_size);
  });
  return out;
}

double rel_max_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  test_util::MaxError e;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) e.add_all(a[i], b[i]);
  return e.rel();  // +inf on any NaN or infinity
}

}  // namespace

// With every product on the integer decode kernel (the bf16 prefill tiles off), the two
// orders of work compute the same sums: equal up to float summation order, unless that order
// tips a discrete choice. The router's top-k is one: where two experts' scores are within
// float noise, prefill and single steps may choose differently at one position, and the
// logits from there on move by ~0.1-0.4% (over 40 prompts x 2 caches x 2 models of this
// model, 2-3 of 160 runs, no run past 0.5%; every other run within 5e-7). So every run agrees
// within 1%, and at least 3 in 4 of the prompts' runs within 2e-5 (a difference in the sums
// themselves moves them all). With the tiles on, prefill rounds x to bf16 where decode
// quantizes it to int8: close, not equal.
TEST(QuantInfer, PrefillPlusIncrementalEqualsOnePass) {
  for (const std::string& dir : {dirs().q8, dirs().q4k}) {
    InferModel m(load_model_config(dir), open_hf_weights(dir));
    EXPECT_EQ(m.embed.dtype, dir == dirs().q8 ? WeightDType::Q8_0 : WeightDType::Q6_K);
    // zaya quantize writes q, k and val_proj1 back to back: single steps read them as one
    // product (InferModel::Attn::qkv1), prefill as three.
    for (const InferModel::Sublayer& s : m.sub)
      if (s.attention) {
        EXPECT_EQ(s.a.qkv1.N, s.a.q.N + s.a.k.N + s.a.v1.N) << dir;
      }
    int runs = 0, exact = 0;
    for (uint64_t seed = 3; seed < 11; ++seed) {
      const auto t = ids(48, seed);
      for (KvCacheDType kv : {KvCacheDType::BF16, KvCacheDType::F32}) {
        linear_quant_set_gemm_rows(0);
        const double d = rel_max_diff(incremental(m, t, 40, kv), one_pass(m, t, 40, kv));
        linear_quant_set_gemm_rows(16);
        const double tiles = rel_max_diff(incremental(m, t, 40, kv), one_pass(m, t, 40, kv));
        EXPECT_LT(d, 1e-2) << dir << " prompt " << seed;
        EXPECT_LT(tiles, 3e-2) << dir << " prompt " << seed;
        ++runs, exact += d < 2e-5;
      }
    }
    EXPECT_GE(4 * exact, 3 * runs) << dir << ": " << exact << " of " << runs << " runs equal to float order";
  }
}

// The decode team's shares of each product's rows (moved by the threads' measured speeds)
// change which thread computes a row, not its value: decoders held at uneven shares give
// the even decoder's logits bit for bit, on the integer kernels and on bf16 (the router).
TEST(QuantInfer, TeamSharesDoNotChangeLogits) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  InferModel m(load_model_config(dirs().q4k), open_hf_weights(dirs().q4k));
  const auto t = ids(12, 5);
  auto run = [&](const std::vector<double>& shares) {
    InferDecoder d(m, 1, int(t.size()), KvCacheDType::BF16);
    if (!shares.empty()) d.team_balance().fix_shares(shares);
    std::vector<float> out;
    for (int32_t tok : t) {
      const float* z = d.feed(&tok, 1);
      out.insert(out.end(), z, z + m.cfg().vocab_size);
    }
    return out;
  };
  const std::vector<float> even = run({});
  for (const std::vector<double>& s : {std::vector<double>{0.2, 0.8}, std::vector<double>{0.93, 0.07}})
    EXPECT_EQ(run(s), even) << "shares " << s[0] << " / " << s[1];
  omp_set_num_threads(saved);
}

// The shares move toward the threads' rates (bytes per second), within [1/4, 7/4] of even.
TEST(QuantInfer, TeamBalanceFollowsMeasuredRates) {
  TeamBalance b;
  b.start(2);
  EXPECT_EQ(b.cuts()[1], 0.5f);
  for (int token = 0; token < 40; ++token) {  // thread 1 reads at half thread 0's rate
    b.start(2);
    b.add(0, 1.0, 2e9);
    b.add(1, 1.0, 1e9);
    b.update();
  }
  EXPECT_NEAR(b.shares()[0], 2.0 / 3.0, 1e-3);
  EXPECT_NEAR(b.cuts()[1], 2.0 / 3.0, 1e-3);
  EXPECT_EQ(b.cuts()[2], 1.f);
  for (int token = 0; token < 40; ++token) {  // thread 0 nearly stopped: held at 1/8
    b.start(2);
    b.add(0, 1.0, 1e6);
    b.add(1, 1.0, 1e9);
    b.update();
  }
  EXPECT_NEAR(b.shares()[0], 0.125, 1e-9);
  b.start(2);
  b.add(0, 1.0, 1e9);  // a thread without a measure leaves the shares as they are
  b.update();
  EXPECT_NEAR(b.shares()[0], 0.125, 1e-9);
  b.start(3);  // a new team size starts even
  EXPECT_NEAR(b.cuts()[1], 1.0 / 3.0, 1e-6);
}

// Batched decode (the team path, rows sharing each weight read) gives each row what a
// batch-1 decoder gives it. The bf16 prefill tiles are off: on one thread there is no team,
// and the batched prefill (B x P = 18 rows) would take the tiles where batch 1 (6 rows) does
// not, rounding x to bf16 where the other quantizes it to int8.
TEST(QuantInfer, BatchedRowsEqualSingleRows) {
  InferModel m(load_model_config(dirs().q4k), open_hf_weights(dirs().q4k));
  linear_quant_set_gemm_rows(0);
  const int B = 3, P = 6, S = 4, V = 300;
  const auto t = ids(B * (P + S), 8);
  InferDecoder d(m, B, P + S);
  std::vector<int32_t> pre(size_t(B) * P);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < P; ++j) pre[size_t(b) * P + j] = t[size_t(b) * (P + S) + j];
  std::vector<std::vector<float>> rows(B);
  const float* z = d.feed(pre.data(), P);
  for (int s = 0; s < S; ++s) {
    std::vector<int32_t> step(B);
    for (int b = 0; b < B; ++b) step[size_t(b)] = t[size_t(b) * (P + S) + P + s];
    z = d.feed(step.data(), 1);
  }
  for (int b = 0; b < B; ++b) {
    InferDecoder one(m, 1, P + S);
    const float* y = one.feed(&t[size_t(b) * (P + S)], P);
    for (int s = 0; s < S; ++s) y = one.feed(&t[size_t(b) * (P + S) + P + s], 1);
    test_util::MaxError e;
    e.add(&z[size_t(b) * V], y, size_t(V));
    EXPECT_LT(e.rel(), 1e-5) << "row " << b << ": " << e.describe();
  }
  linear_quant_set_gemm_rows(16);
}

// Against the bf16 model the quantized logits move by what the format costs: q8_0 a little,
// q4_k more; the bf16 KV cache against fp32 by bf16 rounding of K and V.
TEST(QuantInfer, CloseToBf16Model) {
  InferModel b(load_model_config(dirs().bf16), open_hf_weights(dirs().bf16));
  const auto t = ids(40, 5);
  const auto ref = incremental(b, t, 32, KvCacheDType::F32);
  const double kv = rel_max_diff(incremental(b, t, 32, KvCacheDType::BF16), ref);
  EXPECT_LT(kv, 2e-2);
  EXPECT_GT(kv, 0.0);  // a bf16 cache really is in use
  double prev = 0;
  for (const std::string& dir : {dirs().q8, dirs().q4k}) {
    InferModel m(load_model_config(dir), open_hf_weights(dir));
    const double d = rel_max_diff(incremental(m, t, 32, KvCacheDType::F32), ref);
    std::printf("%s vs bf16: max |logit diff| / max |logit| = %.4f\n", dir.c_str(), d);
    EXPECT_LT(d, dir == dirs().q8 ? 0.03 : 0.15) << dir;
    EXPECT_GT(d, prev);  // q4_k further than q8_0
    prev = d;
  }
}

// The decode profile (zaya generate --profile) counts the steps a team ran, the LM head's
// bytes in its own zone, the layers' products' bytes in theirs, and the work thread 0 does
// alone; an fp32 decoder on one thread has no team and counts nothing.
TEST(QuantInfer, DecodeProfileCountsTheTeamSteps) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  InferModel m(load_model_config(dirs().q8), open_hf_weights(dirs().q8));
  const auto t = ids(10, 9);
  InferDecoder d(m, 1, int(t.size()), KvCacheDType::BF16);
  d.feed(t.data(), 4);  // the prompt, before the profile
  DecodeProfile p;
  d.set_profile(&p);
  for (size_t i = 4; i < t.size(); ++i) d.feed(&t[i], 1);
  ASSERT_EQ(p.tokens(), int(t.size()) - 4);
  const double head_bytes = double(m.embed.bytes());
  double body_bytes = 0;  // the team's products: every matrix but the router MLP and the conv
  for (const InferModel::Sublayer& s : m.sub)
    if (s.attention) {
      for (const Linear* l : {&s.a.q, &s.a.k, &s.a.v1, &s.a.v2, &s.a.o}) body_bytes += double(l->bytes());
    } else {
      body_bytes += double(s.m.down.bytes());
    }
  double head_s = 0, body_s = 0, got_body = 0, got_head = 0;
  for (int th = 0; th < 2; ++th) {
    head_s += p.ms(th, DecodeProfile::kHead);
    body_s += p.ms(th, DecodeProfile::kProducts);
    got_head += p.gbs(th, DecodeProfile::kHead) * p.ms(th, DecodeProfile::kHead) * 1e6;  // bytes per token
    got_body += p.gbs(th, DecodeProfile::kProducts) * p.ms(th, DecodeProfile::kProducts) * 1e6;
  }
  EXPECT_GT(head_s, 0);
  EXPECT_GT(body_s, 0);
  EXPECT_NEAR(got_head, head_bytes, 1e-6 * head_bytes);
  // The routed experts' bytes vary by token (none where the skip class wins): at least the
  // fixed matrices, at most all experts.
  double experts = 0;
  for (const InferModel::Sublayer& s : m.sub)
    for (size_t e = 0; e < s.m.fc1.size(); ++e) experts += double(s.m.fc1[e].bytes() + s.m.fc2[e].bytes());
  EXPECT_GE(got_body, body_bytes * (1 - 1e-9));
  EXPECT_LE(got_body, (body_bytes + experts) * (1 + 1e-9));
  EXPECT_GT(p.ms(0, DecodeProfile::kSerial), 0);  // norms, CCA's steps, the router: thread 0
  EXPECT_EQ(p.ms(1, DecodeProfile::kSerial), 0);
  EXPECT_NE(p.table().find("LM head"), std::string::npos) << p.table();
  omp_set_num_threads(1);  // one thread: no team, nothing counted
  DecodeProfile q;
  InferDecoder d1(m, 1, int(t.size()), KvCacheDType::BF16);
  d1.set_profile(&q);
  d1.feed(t.data(), 3);
  EXPECT_EQ(q.tokens(), 0);
  omp_set_num_threads(saved);
}

TEST(QuantInfer, GenerateRunsQuantizedDirectory) {
  int st = 0;
  const std::string out = test_util::command_output(
      "OMP_NUM_THREADS=2 " + std::string(ZAYA_BIN) + " generate --ckpt " + dirs().q4k +
          " --prompt hi --max-tokens 5 --temperature 0 --profile 2>&1",
      &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("generated"), std::string::npos) << out;
  EXPECT_NE(out.find("decode step, ms per token over 4 tokens"), std::string::npos) << out;
  const std::string bad = test_util::command_output(
      std::string(ZAYA_BIN) + " generate --ckpt " + dirs().q4k + " --prompt hi --fp32 2>&1", &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(bad.find("runs in place only"), std::string::npos) << bad;
  const std::string sc = test_util::command_output(
      "printf '1 2 3 4 5 6 7 8' > " + dirs().root / "ids.txt" + " && " + std::string(ZAYA_BIN) + " score --model " +
          dirs().q8 + " --ids " + dirs().root / "ids.txt" + " --json 2>&1",
      &st);
  EXPECT_EQ(st, 0) << sc;
  EXPECT_NE(sc.find("\"perplexity\""), std::string::npos) << sc;
}
