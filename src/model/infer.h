// In-place inference: prefill and incremental decode over weights read through views
// (model/weights.h), so bf16 checkpoints and quantized GGUF directories are memory-mapped
// and used as stored, never copied to fp32. The math is Decoder's (model/decode.h): the steps
// of cca_forward and moe_forward (model/cca.h, model/moe.h) between its own products, each a
// linear over the stored dtype (bf16: kernels/linear_bf16.h; q8_0, q4_0, q4_k, q6_k:
// kernels/linear_quant.h); activations are fp32. Where it computes a step its own way (the
// value shift, the grouped conv, the experts, the decode team's split), tests/test_infer_math.cpp
// checks it against the model's. The KV cache is bf16 by default
// (fp32 for models given as fp32 views, or on request).
// Only the experts a token is routed to are read; the rows of a batch share each weight
// read (tokens routed to the same expert are one product).
#pragma once
#include <omp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/bf16.h"
#include "core/spin_barrier.h"
#include "kernels/attention.h"
#include "kernels/team_rows.h"
#include "model/decode_profile.h"
#include "model/model.h"
#include "model/team_balance.h"
#include "model/weights.h"

namespace zaya {

// One matrix as stored: y[M, N] (+)= x[M, K] W[N, K]^T.
struct Linear {
  WeightDType dtype = WeightDType::F32;
  const void* w = nullptr;
  int N = 0, K = 0;
  size_t bytes() const { return weight_bytes(dtype, size_t(N), K); }
  size_t row_bytes() const { return weight_bytes(dtype, 1, K); }
  // Row r (one token's embedding) as fp32: dequantized / widened from the stored type.
  void row(int r, float* out) const;
  void apply(float* y, int ldy, const float* x, int ldx, int M, float beta = 0.f) const;
  // Inside a running OpenMP region, called by every thread: each computes a share of the
  // output rows (kernels/linear_bf16.h, linear_bf16_team), its share as `cuts` give it, and
  // with `steal` steps of slower threads' shares (kernels/team_rows.h). No barrier at the end.
  // Returns the bytes of W this thread read, 0 when the product shares its rows its own way
  // (fp32; bf16 over more than a few rows of x).
  size_t apply_team(float* y, int ldy, const float* x, int ldx, int M, float beta = 0.f, const float* cuts = nullptr,
                    TeamSteal* steal = nullptr) const;
};

// The weights of a model as views, plus fp32 copies of the small vectors (norms, biases,
// scales, conv taps: well under 1% of the bytes). Shapes are checked against the config.
class InferModel {
 public:
  InferModel(const ModelConfig& cfg, WeightStore store);
  const ModelConfig& cfg() const { return cfg_; }
  const WeightStore& store() const { return store_; }
  // Bytes of the stored weights (all tensors).
  uint64_t stored_bytes() const;

  struct ResScale { const float *hs = nullptr, *hb = nullptr, *rs = nullptr, *rb = nullptr; };
  struct Attn {
    Linear q, k, v1, v2, o, conv1;  // conv1 [C, hd, K1] as [C, hd*K1]
    const float *conv0_w, *conv0_b, *conv1_b, *temp;
    // q, k and val_proj1 as one matrix where they lie back to back in one type (a GGUF file
    // as zaya quantize writes it): one product for all three in decode. N = 0: they do not.
    Linear qkv1{};
  };
  struct Moe {
    Linear down, mlp0, mlp2, mlp4;
    const float *down_b, *eda = nullptr, *norm, *mlp0_b, *mlp2_b, *balancing_bias;
    std::vector<Linear> fc1, fc2;
  };
  struct Sublayer {
    bool attention = true;
    ResScale rs;
    const float* norm = nullptr;
    Attn a{};
    Moe m{};
  };
  Linear embed;  // [V, D]: token rows, and the tied LM head
  std::vector<Sublayer> sub;
  ResScale final_rs;
  const float* final_norm = nullptr;
  RopeTable rope;

 private:
  ModelConfig cfg_;
  WeightStore store_;
  std::vector<std::vector<float>> small_;  // fp32 copies of the small tensors
};

// The KV cache's element type. Auto: fp32 when the model's matrices are fp32 views (exact
// checks against Decoder), bf16 otherwise.
enum class KvCacheDType { Auto, BF16, F32 };

class InferDecoder {
 public:
  InferDecoder(const InferModel& m, int batch, int max_len, KvCacheDType kv = KvCacheDType::Auto);
  bool kv_bf16() const { return kv16_; }
  // tokens [batch, n]: prefill (n > 1) or one step (n = 1). Returns the logits of the last
  // position of every row, [batch, V] (valid until the next call).
  const float* feed(const int32_t* tokens_BN, int n);
  // Batch 1: log p(ids[t+1] | ids[0..t]) for t < n-1, fed in chunks of `chunk` tokens from
  // the current position (the state continues; reset() first for a fresh sequence).
  std::vector<double> logprobs(const int32_t* ids, int n, int chunk = 512);
  // tokens [batch, n] from the current position; then f(r, logits_V) for every row
  // r = b * n + j in order: the logits of the token after tokens_BN[r] (valid during the call).
  // The LM head runs over 32 rows at a time (scoring: zaya score and zaya eval). With `want`,
  // only the rows r it accepts (padding skipped: the head is ~1 GFLOP a row on ZAYA1-base).
  void feed_all_logits(const int32_t* tokens_BN, int n, const std::function<void(int, const float*)>& f,
                       const std::function<bool(int)>& want = {});
  // Every row of this decoder continues from row `row` of src (same model): src's state for
  // its first pos(row) positions is copied into each row (a context prefilled once, then
  // several continuations of it as rows).
  void copy_rows_from(const InferDecoder& src, int row);
  // Row dst_row continues from row src_row of src (same model and cache type); the other rows
  // keep their state. Rows may then sit at different positions: every feed continues each row
  // from its own position (its RoPE position, its cache entries, its conv tail), and a row
  // attends to its own first pos(b) + j + 1 cache entries only. Rows at one position take
  // the batched kernels; rows at different positions run attention row by row.
  void copy_row_from(const InferDecoder& src, int src_row, int dst_row);
  void reset();
  // One sub-layer alone, as feed() runs it, for tests/test_infer_math.cpp (which checks it
  // against cca_forward / moe_forward): x_ND [batch*n, D], the sub-layer's normed input ->
  // out_ND. An attention sub-layer continues its cache and every row advances by n; an MoE
  // sub-layer reads r_prev [batch*n, R] (nullptr: none) and leaves its router state in r.
  void run_sublayer(int s, const float* x_ND, int n, float* out_ND, const float* r_prev = nullptr, float* r = nullptr);
  int pos() const { return state_.len; }  // the position of every row (rows apart: the furthest)
  int pos(int row) const { return row_len_[size_t(row)]; }
  int batch() const { return batch_; }
  // Decode steps (team mode) add where their time goes to *p (nullptr: no timing).
  void set_profile(DecodeProfile* p) { profile_ = p; }
  // How the decode team shares each product's rows (model/team_balance.h); tests fix them.
  TeamBalance& team_balance() { return balance_; }
  // Weight bytes the last feed() read (each matrix counted once, whatever the batch).
  uint64_t last_weight_bytes() const { return bytes_; }

 private:
  // Checks a feed of n tokens per row against the length and sizes the activations.
  void start_feed(int n);
  // f() as one OpenMP region (team mode) for at most kTeamRows rows, else on this thread.
  template <class F>
  void run_rows(int rows, F&& f);
  void advance(int n);  // every row's position moves n on
  // Leaves the final normed rows in xf_; with `head`, also the logits of each row's last
  // position in last_BV_. At most kTeamRows rows (decode) run as one OpenMP region.
  void forward(const int32_t* tokens_BN, int n, bool head);
  void layers(int n, bool head);
  void attention(const InferModel::Attn& a, int li, int n);
  void attention_core(const InferModel::Attn& a, int li, int n, CcaPart part = {});  // between the products
  // Rows at different positions (infer_rows.cpp): the attention scratch for each row at its
  // own position, and the attention of each row over its own cache.
  void rows_scratch(int n);
  void rows_attention(int li, int n);
  AttnShape row_shape(int b, int n) const;
  // f(i) for i < count, split over the team (or a parallel loop), then a barrier.
  template <class F>
  void split(int count, F&& f);
  // `then` (nullable) runs on the thread that combines the experts' outputs, right after it, in
  // the same one-thread section: the next sub-layer's entry, without a meeting of its own.
  void moe(const InferModel::Moe& m, int n, const float* r_prev, float* r, const std::function<void()>* then = nullptr);
  void reserve(int rows);
  // A product; in team mode split over the team, then a barrier unless `sync` is false.
  void lin(const Linear& l, float* y, int ldy, const float* x, int ldx, int M, float beta = 0.f, bool sync = true);
  // Adds l's bytes to the bytes read (once per team: thread 0; outside a region also 0).
  void count_read(const Linear& l) {
    if (omp_get_thread_num() == 0) bytes_ += l.bytes();
  }
  // Work done by one thread (in team mode: thread 0, while the others wait at the barrier
  // that ends it).
  template <class F>
  void serial(F&& f);
  // In team mode, all threads meet (the products before it are complete): on sync_ when the
  // team has no more threads than CPUs, ~5x cheaper than libgomp's barrier, which a step of
  // ZAYA1-base would meet ~480 times; on libgomp's otherwise.
  void barrier();

  static constexpr int kTeamRows = 32;
  bool team_ = false;
  SpinBarrier sync_;     // the team's barrier
  DecodeProfile* profile_ = nullptr;
  void profiled(DecodeProfile::Zone z, double t0) const;  // the zone took now_seconds() - t0 (team mode)
  TeamBalance balance_;  // the team's share of each product's rows
  TeamSteal steal_;      // and the steps of them a thread done first takes from the others

  const InferModel& m_;
  int batch_, max_len_, cap_ = 0;
  DecodeState<float> state_;  // with a bf16 cache: its tails and lengths, K and V in kv16_
  std::vector<int> row_len_;  // each row's position (state_.len: the largest)
  bool ragged_ = false;       // this forward's rows are at different positions
  size_t row_scratch_ = 0;    // attention scratch per thread for the row-by-row path
  bool kv16_ = true;
  struct Kv16 { std::vector<bf16> k, v; };  // [B, Hk, max_len, hd] head-major
  std::vector<Kv16> kv16c_;
  std::vector<float> kvw_;  // prefill over the bf16 cache: K and V widened to fp32
  uint64_t bytes_ = 0;
  // Activations for up to cap_ rows.
  std::vector<float> res_, x_, h_, rstd_, xf_, last_, last_BV_;
  // pv_: p [N, C], then v [N, KD] of the feed's N rows (with one row, q | k | v1 are one output row).
  std::vector<float> pv_, xs_, y0_, ytap_, conv_, qkpre_, qk_, norms_, attn_, lse_, scratch_;
  std::vector<float> r_[2], h0_, pre_, h2_, prob_, gate_, xe_, ye_, u_, act_;
  // The router's down-projection, and each thread's own router input, norm and activations
  // (moe(): [thread][r (thread 0 writes r_ instead), zn, h, pre (N x R each), rstd (N)]).
  std::vector<float> rd_, router_own_;
  std::vector<int32_t> choice_;
  std::vector<int64_t> slot_row_, expert_count_, expert_start_;
};

}  // namespace zaya
