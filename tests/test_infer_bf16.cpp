// In-place inference (model/infer.h): same logits as Decoder over fp32 views; bf16 weights
// memory-mapped and used as stored match Model<float> loaded from the same files within a
// bf16 tolerance (prefill + decode); the bf16 linear kernels agree; a missing shard is an
// error naming it; peak RSS of a few-hundred-MB bf16 model stays near its file size.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/attention_group.h"
#include "kernels/gemm.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "model/decode.h"
#include "model/infer.h"
#include "check_util.h"
#include "test_util.h"

using namespace zaya;
namespace fs = std::filesystem;

static ModelConfig tiny(int topk = 1) {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.init_std = 0.2;
  c.topk = topk;
  return c;
}

// A temporary directory for one test (removed at its end).
struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("infer", tag) {}
};

// A model of config c with random weights (seed), saved as a bf16 HF directory.
static void save_random_bf16(const ModelConfig& c, uint64_t seed, const std::string& dir) {
  Model<float> m(c);
  randomize_for_checks(m.layout, seed, m.params.data(), m.buffers.data());
  save_hf_dir(dir, m, DType::BF16, 0, false);
}

static std::vector<int32_t> random_ids(int n, int V, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  Philox r(seed, 1);
  for (auto& v : ids) v = int32_t(r.below(uint64_t(V)));
  return ids;
}

// Feeds ids [B, T] as a prefill of `prefill` tokens then single steps to both decoders;
// returns the largest |difference| of the last-position logits relative to max |logit|.
template <class A, class Bd>
static double compare_decoders(A& a, Bd& b, const std::vector<int32_t>& ids, int B, int T, int prefill, int V) {
  test_util::MaxError e;
  auto cmp = [&](const float* x, const float* y) { e.add(x, y, size_t(B) * V); };
  std::vector<int32_t> chunk(size_t(B) * prefill);
  for (int r = 0; r < B; ++r)
    for (int t = 0; t < prefill; ++t) chunk[size_t(r) * prefill + t] = ids[size_t(r) * T + t];
  cmp(a.feed(chunk.data(), prefill), b.feed(chunk.data(), prefill));
  for (int t = prefill; t < T; ++t) {
    std::vector<int32_t> step(static_cast<size_t>(B));
    for (int r = 0; r < B; ++r) step[size_t(r)] = ids[size_t(r) * T + t];
    cmp(a.feed(step.data(), 1), b.feed(step.data(), 1));
  }
  return e.rel();  // +inf on any NaN or infinity
}

TEST(InferBf16, SameLogitsAsDecoderOverFp32Views) {
  for (int topk : {1, 2}) {
    ModelConfig c = tiny(topk);
    Model<float> m(c);
    randomize_for_checks(m.layout, 3, m.params.data(), m.buffers.data());
    InferModel im(c, WeightStore::from_model(m));
    // B 2: decode's one-region team form throughout; B 1 with a 36-token prefill: a region
    // per product for the prefill (more than 32 rows), then the team form.
    for (auto [B, T, prefill] : {std::tuple{2, 11, 4}, std::tuple{1, 40, 36}}) {
      auto ids = random_ids(B * T, c.vocab_size, 5);
      Decoder<float> ref(m, B, T);
      InferDecoder dec(im, B, T);
      EXPECT_LT(compare_decoders(dec, ref, ids, B, T, prefill, c.vocab_size), 1e-5) << "topk " << topk << " B " << B;
    }
  }
}

TEST(InferBf16, InPlaceBf16MatchesFp32LoadOfSameFiles) {
  ModelConfig c = tiny(1);
  TempDir tmp("bf16");
  const std::string dir = tmp.str();
  save_random_bf16(c, 7, dir);
  Model<float> f32(c);
  load_hf_weights(dir, f32);
  WeightStore ws = open_hf_weights(dir);
  ASSERT_TRUE(hf_weights_are_bf16(dir));
  const WeightView* q = ws.find("model.layers.0.self_attn.qkv.linear_q.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->dtype, WeightDType::BF16);  // a view into the mapping, not a copy
  InferModel im(c, std::move(ws));
  // Activations are rounded to bf16 at every linear (weights are exact): relative error of
  // a dot product ~ 2^-9; through 6 sub-layers we allow 3% of the largest logit. The
  // 36-token prefill runs its products on oneDNN's GEMM (16 rows or more) where available.
  for (auto [B, T, prefill] : {std::tuple{2, 12, 5}, std::tuple{1, 40, 36}}) {
    auto ids = random_ids(B * T, c.vocab_size, 9);
    Decoder<float> ref(f32, B, T);
    InferDecoder dec(im, B, T);
    const double rel = compare_decoders(dec, ref, ids, B, T, prefill, c.vocab_size);
    EXPECT_LT(rel, 3e-2) << "B " << B;
    EXPECT_GT(rel, 0.0);  // it really ran in bf16
  }
  const int T = 12;
  auto ids = random_ids(2 * T, c.vocab_size, 9);
  // logprobs() equals a full forward's log-softmax.
  InferDecoder dec1(im, 1, T);
  std::vector<int32_t> one(ids.begin(), ids.begin() + T);
  auto lp = dec1.logprobs(one.data(), T, 4);
  ASSERT_EQ(lp.size(), size_t(T - 1));
  f32.forward(one.data(), one.data() + 1, 1, T - 1);
  for (int t = 0; t < T - 1; ++t)
    EXPECT_NEAR(lp[size_t(t)], double(f32.logits()[size_t(t) * c.vocab_size + one[size_t(t) + 1]]) - f32.lse()[t],
                0.05);
}

// Every tier (AVX512-BF16, AVX2, portable; a tier the CPU lacks runs the next) against the
// exact product of x rounded to bf16.
TEST(InferBf16, EveryKernelTierMatchesTheExactProduct) {
  // AVX512-BF16, up to 8 rows: the decode kernel (4 streams up to 4 rows, 3 streams up to 8);
  // 9: the block kernel. AVX2: streams up to 4 rows (4 streams, 2 from 3 rows on), 4 rows at
  // a time beyond. 20: the bf16 GEMM where the CPU has one; 64: also the fp32 GEMM over W
  // widened where it has none. N 9 and 37: streams of unequal length; K 70: a tail past the last 8 (AVX2) or 32
  // (AVX-512).
  for (int M : {1, 3, 5, 8, 9, 20, 64})
  for (int N : {9, 37})
  for (int K : {24, 32, 70, 256}) {
    std::vector<float> x(size_t(M) * K), wf(size_t(N) * K);
    std::vector<bf16> w(wf.size());
    Philox r(K, 2);
    for (auto& v : x) v = float(r.normal());
    for (size_t i = 0; i < w.size(); ++i) w[i] = to_bf16(float(r.normal())), wf[i] = from_bf16(w[i]);
    for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
      std::vector<float> y(size_t(M) * N, 1.f);
      linear_bf16_force(tier);
      linear_bf16(y.data(), N, x.data(), K, w.data(), M, N, K);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double ref = 0;  // x rounded to bf16, exact products
          for (int k = 0; k < K; ++k) ref += double(from_bf16(to_bf16(x[size_t(i) * K + k]))) * wf[size_t(j) * K + k];
          EXPECT_NEAR(y[size_t(i) * N + j], ref, 1e-4 * (1 + std::fabs(ref)))
              << linear_bf16_kernel() << " M " << M << " N " << N << " K " << K;
        }
      linear_bf16_force(KernelTier::Auto);
    }
  }
}

// Weights mapped from a safetensors file start anywhere (after a header of any length): the
// decode kernel aligns its loads and masks each row's ends. W placed 0..31 elements past a
// 64-byte boundary, with NaN bit patterns in the bytes around it (a masked lane that read
// them would poison the sums), against the exact reference.
TEST(InferBf16, DecodeKernelAtEveryAlignment) {
  for (int M : {1, 3, 6})
    for (int K : {32, 96, 256})
      for (int lead : {0, 1, 7, 16, 31}) {
        const int N = 13;
        std::vector<float> x(size_t(M) * K);
        Philox r(uint64_t(K * 31 + lead), 4);
        for (auto& v : x) v = float(r.normal());
        // 64-byte aligned storage with room before and after the matrix.
        std::vector<bf16> store(size_t(N) * K + 256, bf16{0x7fc1});  // NaN everywhere else
        const uintptr_t a = reinterpret_cast<uintptr_t>(store.data());
        bf16* W = store.data() + (64 - a % 64) % 64 / 2 + 32 + lead;
        std::vector<float> wf(size_t(N) * K);
        for (size_t i = 0; i < wf.size(); ++i) W[i] = to_bf16(float(r.normal())), wf[i] = from_bf16(W[i]);
        std::vector<float> y(size_t(M) * N, 0.f);
        linear_bf16(y.data(), N, x.data(), K, W, M, N, K);
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            double ref = 0;
            for (int k = 0; k < K; ++k) ref += double(from_bf16(to_bf16(x[size_t(i) * K + k]))) * wf[size_t(j) * K + k];
            ASSERT_NEAR(y[size_t(i) * N + j], ref, 1e-4 * (1 + std::fabs(ref)))
                << linear_bf16_kernel() << " M " << M << " K " << K << " lead " << lead;
          }
      }
}

// x [M, K] and bf16 W [N, K] with normal entries; wf: W's values as floats.
static void random_linear(int M, int N, int K, uint64_t seed, std::vector<float>& x, std::vector<bf16>& w,
                          std::vector<float>& wf) {
  x.resize(size_t(M) * K);
  wf.resize(size_t(N) * K);
  w.resize(wf.size());
  Philox r(seed, 2);
  for (auto& v : x) v = float(r.normal());
  for (size_t i = 0; i < w.size(); ++i) w[i] = to_bf16(float(r.normal())), wf[i] = from_bf16(w[i]);
}

// Decode's team form (each thread of a running region a share of the rows) gives the very
// sums of one call, for any number of threads, uneven splits and more rows than a tile.
TEST(InferBf16, TeamSplitEqualsOneCall) {
  for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable})
    for (int M : {1, 3, 5, 8, 70})
      for (int N : {37, 1000}) {  // 1000 x 70: one call opens a region of its own
        const int K = 70;
        std::vector<float> x, wf;
        std::vector<bf16> w;
        random_linear(M, N, K, 11 + M, x, w, wf);
        linear_bf16_force(tier);
        // One call on the same kernel: below 16 rows linear_bf16 is our kernel; from 16 on it
        // is oneDNN unless forced portable, so the 70-row native case compares within rounding.
        std::vector<float> one(size_t(M) * N, 0.f), inner(one);
        linear_bf16(one.data(), N, x.data(), K, w.data(), M, N, K);
        const bool exact = tier == KernelTier::Portable || M < 16;
        // Called by one thread of a running region (CCA's conv groups): the same sums.
#pragma omp parallel num_threads(2)
#pragma omp single
        linear_bf16(inner.data(), N, x.data(), K, w.data(), M, N, K);
        if (exact) {
          EXPECT_EQ(one, inner) << linear_bf16_kernel() << " M " << M << " N " << N;
        }
        // Even shares, and cuts anywhere (the decoder moves them by the threads' speeds).
        const std::vector<std::vector<float>> cuts = {{}, {}, {}, {0.f, 0.2f, 1.f}, {0.f, 0.05f, 0.6f, 1.f}};
        for (size_t ci = 0; ci < cuts.size(); ++ci) {
          const int threads = ci < 3 ? int(ci) + 1 : int(cuts[ci].size()) - 1;
          std::vector<float> team(size_t(M) * N, 0.f);
#pragma omp parallel num_threads(threads)
          linear_bf16_team(team.data(), N, x.data(), K, w.data(), M, N, K, 0.f,
                           cuts[ci].empty() ? nullptr : cuts[ci].data());
          if (exact) {
            EXPECT_EQ(one, team) << linear_bf16_kernel() << " M " << M << " N " << N << " threads " << threads;
          } else {
            for (size_t i = 0; i < team.size(); ++i)
              ASSERT_NEAR(team[i], one[i], 1e-4 * (1 + std::fabs(one[i]))) << "M " << M << " threads " << threads;
          }
          // Stealing (kernels/team_rows.h): six products back to back, no barrier between.
          if (!exact) continue;
          TeamSteal steal;
          steal.reset(threads);
          std::vector<std::vector<float>> ys(6, std::vector<float>(size_t(M) * N, 0.f));
#pragma omp parallel num_threads(threads)
          for (auto& y : ys)
            linear_bf16_team(y.data(), N, x.data(), K, w.data(), M, N, K, 0.f,
                             cuts[ci].empty() ? nullptr : cuts[ci].data(), &steal);
          for (const auto& y : ys)
            EXPECT_EQ(one, y) << linear_bf16_kernel() << " M " << M << " N " << N << " threads " << threads
                              << " stealing";
        }
        linear_bf16_force(KernelTier::Auto);
      }
}

// From 16 rows on linear_bf16 is a GEMM: the bf16 GEMM over W in place (AMX or oneDNN), or
// on a CPU without one (from 64 rows) the fp32 GEMM over W widened in tiles: the same values as the portable
// kernel up to the order of the sums.
TEST(InferBf16, GemmAgreesWithOwnKernel) {
  const int M = 70, N = 50, K = 96;
  std::vector<float> x, wf;
  std::vector<bf16> w;
  random_linear(M, N, K, 5, x, w, wf);
  std::vector<float> y(size_t(M) * N, 0.5f), own(y);
  linear_bf16(y.data(), N, x.data(), K, w.data(), M, N, K, 1.f);  // beta 1: accumulates
  linear_bf16_force(KernelTier::Portable);
  linear_bf16(own.data(), N, x.data(), K, w.data(), M, N, K, 1.f);
  linear_bf16_force(KernelTier::Auto);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], own[i], 1e-4 * (1 + std::fabs(own[i]))) << i;
}

TEST(InferBf16, MissingShardIsAnErrorNamingIt) {
  ModelConfig c = tiny(1);
  Model<float> m(c);
  m.init(1);
  TempDir tmp("shards");
  const std::string dir = tmp.str();
  save_hf_dir(dir, m, DType::BF16, 4096, false);
  std::vector<fs::path> shards;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  ASSERT_GE(shards.size(), 3u);
  std::sort(shards.begin(), shards.end());
  EXPECT_NO_THROW(open_hf_weights(dir));
  fs::remove(shards[1]);
  try {
    open_hf_weights(dir);
    FAIL() << "no error for a missing shard";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(shards[1].filename().string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ peak RSS (in a child process)

static long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
  return -1;
}

// A model of ~290 MB in bf16 (an fp32 copy would be ~580 MB).
static ModelConfig rss_config() {
  ModelConfig c = tiny(1);
  c.hidden_size = 1024;
  c.vocab_size = 32768;
  c.num_attention_heads = 8;
  c.head_dim = 128;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.num_layers = 4;
  c.num_experts = 8;
  c.ffn_hidden_size = 2048;
  c.router_hidden = 64;
  c.init_std = 0.02;
  return c;
}

// Runs only when the parent test starts it: prefill + decode on the mmapped model, prints
// the rise of the peak RSS over the start (kB).
TEST(InferBf16, RssChild) {
  const char* dir = std::getenv("ZAYA_INFER_RSS_DIR");
  if (!dir) GTEST_SKIP() << "run by InferBf16.PeakRssNearFileSize";
  const long base = status_kb("VmHWM:");
  InferModel im(rss_config(), open_hf_weights(dir));
  InferDecoder dec(im, 1, 96);
  auto ids = random_ids(64, im.cfg().vocab_size, 3);
  const float* lg = dec.feed(ids.data(), 64);
  for (int t = 0; t < 8; ++t) {
    int32_t next = int32_t(std::max_element(lg, lg + im.cfg().vocab_size) - lg);
    lg = dec.feed(&next, 1);
  }
  std::printf("RSS_RISE_KB %ld\n", status_kb("VmHWM:") - base);
}

TEST(InferBf16, PeakRssNearFileSize) {
  TempDir tmp("rss");
  const std::string dir = tmp.str();
  const uint64_t bytes = write_random_hf_bf16(dir, rss_config(), 1, 64u << 20);
  ASSERT_GT(bytes, 250u << 20);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "ZAYA_INFER_RSS_DIR=" + dir + " " + self + " --gtest_filter=InferBf16.RssChild 2>&1";
  int status = 0;
  const std::string out = test_util::command_output(cmd, &status);
  EXPECT_EQ(status, 0) << out;
  const size_t at = out.find("RSS_RISE_KB ");
  const long rise = at == std::string::npos ? -1 : std::atol(out.c_str() + at + 12);
  ASSERT_GT(rise, 0) << out;
  // File-backed pages of the weights the run touched (at most the file) + KV cache,
  // activations, fp32 small tensors and the 32K x 64 logits: well under 64 MB.
  const double file_mb = double(bytes) / (1 << 20), rise_mb = double(rise) / 1024;
  std::printf("model file %.0f MB, peak RSS rise %.0f MB\n", file_mb, rise_mb);
  EXPECT_LT(rise_mb, file_mb + 64) << "weights copied? fp32 would be " << 2 * file_mb << " MB";
}

// `zaya score` on a bf16 HF directory uses the in-place path; --fp32 the fp32 copy.
TEST(InferBf16, ScoreCliInPlaceMatchesFp32) {
  TempDir tmp("score");
  const std::string dir = tmp.str();
  save_random_bf16(tiny(1), 4, dir);
  {
    std::ofstream f(dir + "/ids.txt");
    f << "3 17 42 9 1 50 60 7";
  }
  auto loss = [&](const std::string& extra) {
    const std::string cmd = std::string(ZAYA_BIN) + " score --model " + dir + " --ids " + dir + "/ids.txt --json" + extra;
    int status = 0;
    const std::string out = test_util::command_output(cmd, &status);
    EXPECT_EQ(status, 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["tokens"], 7);
    return j["loss"].get<double>();
  };
  const double inplace = loss(""), fp32 = loss(" --fp32");
  EXPECT_NEAR(inplace, fp32, 0.02);
  EXPECT_NE(inplace, fp32);  // two different paths ran
}

// `zaya info` names the tier each decode kernel runs on this CPU, as the kernels report it.
TEST(InferBf16, InfoNamesTheDecodeKernels) {
  int status = 0;
  const std::string out = test_util::command_output(std::string(ZAYA_BIN) + " info", &status);
  ASSERT_EQ(status, 0) << out;
  AttnShape s{};
  s.hd = 128;
  const std::string want = std::string("decode kernels: bf16 weights ") + linear_bf16_kernel() +
                           ", quantized weights " + linear_quant_kernel() + ", attention over the KV cache " +
                           attention_group_kernel(s, true) + "\n";
  EXPECT_NE(out.find(want), std::string::npos) << out;
}

// `zaya generate` on an HF directory (bf16, used in place) with its own tokenizer.json: the
// prompt comes back first, sampling is reproducible by seed, ids past the tokenizer's pieces
// (the model's vocabulary is larger, as ZAYA1's is) are never sampled, and a directory
// without a tokenizer is a one-line error.
TEST(InferBf16, GenerateCliOnHfDirectory) {
  ModelConfig c = tiny(1);
  c.vocab_size = 300;  // 4 specials + 256 byte tokens
  TempDir tmp("generate");
  const std::string dir = tmp.str();
  save_random_bf16(c, 6, dir);
  auto run = [&](const std::string& args, int* rc = nullptr) {
    const std::string cmd = std::string(ZAYA_BIN) + " generate --ckpt " + dir + " " + args + " 2>&1";
    int status = 0;
    const std::string out = test_util::command_output(cmd, &status);
    if (rc) *rc = status;
    else EXPECT_EQ(status, 0) << out;
    return out;
  };
  int rc = 0;
  const std::string missing = run("--prompt hi", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(missing.find("no tokenizer.json or tokenizer.model"), std::string::npos) << missing;
  test_util::write_byte_tokenizer(dir);
  const std::string greedy = run("--prompt hello --temperature 0 --max-tokens 6");
  EXPECT_EQ(greedy.rfind("hello", 0), 0u) << greedy;  // the prompt is echoed first
  EXPECT_NE(greedy.find(" tokens in "), std::string::npos) << greedy;
  const std::string again = run("--prompt hello --temperature 0 --max-tokens 6");
  EXPECT_EQ(again.substr(0, again.find('[')), greedy.substr(0, greedy.find('[')));  // greedy is deterministic
  const std::string a = run("--prompt hello --seed 7 --max-tokens 8"), b = run("--prompt hello --seed 7 --max-tokens 8");
  EXPECT_EQ(a.substr(0, a.find('[')), b.substr(0, b.find('[')));  // same seed, same text (timings aside)
}
