// Model<T>: the ZAYA1 model over flat parameter / gradient / buffer arrays, with every
// activation backward needs preallocated once per (B, T). T = float for training,
// double for gradient checks. Data flow (spec section 2):
//   embed -> [res-scale merge, input_norm, CCA | router + experts] x 2L -> final merge,
//   final_norm -> logits = x E^T -> cross-entropy.
// The model knows nothing of parallelism: experts run behind ExpertCompute (moe.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/bf16.h"
#include "kernels/gemm.h"
#include "kernels/activations.h"
#include "model/cca.h"
#include "model/moe.h"
#include "model/params.h"
#include "model/split_master.h"

namespace zaya {

template <class T>
struct SublayerActs {
  std::vector<T> res_ND, x_ND, rstd_N, out_ND;
  bool x_bf16_only = false;  // x kept only as the norm's bf16 copy (x_ND empty; Model::forward)
  CcaSaved<T> cca;
  MoeSaved<T> moe;
};

// Decode state for all attention sub-layers (see CcaCache); len = tokens seen so far.
template <class T>
struct DecodeState {
  std::vector<CcaCache<T>> cca;
  int len = 0;
};

struct ForwardResult {
  double loss = 0;   // mean over counted targets (0 if no targets), without the aux loss
  double aux_loss = 0;  // Switch load-balancing loss summed over MoE sub-layers (when enabled)
  int count = 0;     // counted targets
  double loss_sum = 0;
};

template <class T>
class Model {
 public:
  explicit Model(const ModelConfig& cfg, ExpertRange experts = {});

  ModelLayout layout;
  const ModelConfig& cfg() const { return layout.cfg; }
  std::vector<T> params, grads, buffers;  // flat, laid out by layout.params / layout.buffers

  void init(uint64_t seed);  // from-scratch weights, spec buffers
  // Activations for batches up to B x T (reallocates only when the shape grows).
  void reserve(int B, int T_);
  // inputs [B*T] token ids; targets [B*T] or nullptr (then only logits are computed).
  // pos0: position of the first token (RoPE).
  // state (decode): continue after state->len tokens, appending to its caches; pos0 is then
  // state->len. backward() is not available after a forward with state.
  ForwardResult forward(const int32_t* inputs, const int32_t* targets, int B, int T_, int pos0 = 0,
                        DecodeState<T>* state = nullptr);
  void init_decode_state(DecodeState<T>& state, int batch, int max_len) const;
  // d(mean loss)/d(params) * loss_scale into grads. Needs a forward with targets.
  //   - Accumulate: added to grads (zero_grads() first, or earlier micro-batches' sums).
  //   - Overwrite: replaces grads, with no zeroing pass over them first: the largest
  //     gradients (the experts' and the tied embedding's, ~90% of zaya1-small's) are written
  //     by their products directly (beta = 0), only the rest is zeroed. The same numbers as
  //     zero_grads() then Accumulate, bit for bit.
  void backward(T loss_scale = T(1), GradMode mode = GradMode::Accumulate);
  void zero_grads();
  // Called during backward() as soon as every gradient at flat offset >= `from` is final
  // (after each sub-layer; the layout puts later sub-layers higher). Data parallelism hangs
  // its bucketed gradient reduction here to overlap backward; the model knows nothing of it.
  std::function<void(size_t from)> grads_ready;
  // Switch-style auxiliary load-balancing loss coefficient (0 = off, the ZAYA1 default:
  // ZAYA1 balances with biases). When on, backward adds its gradient (times loss_scale).
  void set_aux_loss_coeff(double c);
  // RoPE base (changes at recipe phase boundaries, e.g. 10K -> 1M for context extension).
  void set_rope_theta(double theta);
  const RopeTable& rope() const { return rope_; }

  // [B*T, V] after forward (backward overwrites them with their gradient). With bf16 products
  // a forward with targets keeps them only in bf16 (logits16()); logits() is then nullptr.
  const T* logits() const { return logits_bf16_ ? nullptr : logits_NV_.data(); }
  const bf16* logits16() const { return logits_bf16_ ? logits16_.data() : nullptr; }
  const T* lse() const { return lse_N_.data(); }
  // Per MoE sub-layer: tokens per class (incl. skip) in the last forward.
  std::vector<std::vector<int64_t>> class_counts() const;
  // Per MoE sub-layer, each class's probability summed over the last forward's tokens.
  std::vector<std::vector<double>> class_prob_sums() const;
  double min_routing_margin() const;  // closest any token came to a routing tie

  // Context parallel: this process holds one shard of every sequence (forward's T is the
  // shard's length, pos0 its first position); CCA exchanges through `shard`. nullptr: whole.
  void set_seq_shard(std::unique_ptr<SeqShard<T>> shard) { shard_ = std::move(shard); }

  ExpertCompute<T>& experts() { return *experts_; }
  void set_experts(std::unique_ptr<ExpertCompute<T>> e);

  T* p(size_t off) { return params.data() + off; }
  const T* p(size_t off) const { return params.data() + off; }

  // bf16 GEMMs (gemm precision bf16, T = float): the weights rounded to bf16 once, read by
  // every product in place of rounding each weight again (gemm's Bf16Mirror). forward() fills
  // it unless a caller marked it current: one that wrote it itself (the optimizer's fused
  // pass: Optimizer::step's params_bf16) or knows params did not change since. backward()
  // ends the mark, since its caller updates params next; so do the loaders
  // (invalidate_bf16_weights). The backward of a forward reads the copy that forward used.
  std::vector<bf16> params_bf16;
  void mark_bf16_weights_current() { bf16_current_ = params_bf16.size() == params.size(); }
  // params were written (all of them, plain fp32), as a loader does: the copy is stale and
  // the split layout (below) gone.
  void invalidate_bf16_weights() { bf16_current_ = split_encoded_ = false; }
  // Sizes params_bf16 when bf16 GEMMs are on (so an optimizer can write it); nullptr if off
  // or with the split master.
  bf16* bf16_weights();

  // bf16 training without the copy (model/split_master.h; T = float): while bf16 products
  // are on, forward() stores the product weights of params split in place (each row: its
  // bf16 values, then its low halves), the products read the bf16 halves, and an optimizer
  // given split_master() updates them as they are. params then hold no plain fp32 values
  // for those tensors: a caller that reads or writes params calls plain_master() first (a
  // pass over the weights; the next forward splits them again).
  void use_split_master(bool on);
  const SplitMaster* split_master() const { return split_encoded_ ? split_.get() : nullptr; }
  void plain_master();
  // The norms' bf16 output copies the last forward wrote (0 without activation copies).
  size_t activation_copies() const { return x16_count_; }

 private:
  int B_ = 0, S_ = 0, cap_B_ = 0, cap_T_ = 0, pos0_ = 0;
  std::vector<int32_t> inputs_, targets_;
  std::vector<T> emb_ND_, res_final_ND_, xf_ND_, rstd_f_N_, logits_NV_, lse_N_;
  // bf16 products with targets: the logits in bf16 [N, V] (the LM head's output rounded, as
  // the loss and its gradient read it); logits_NV_ then holds one fp32 block of columns.
  std::vector<bf16> logits16_;
  bool logits_bf16_ = false;  // the last forward kept the logits in logits16_
  bool xf_bf16_only_ = false;  // ... and xf only as its bf16 copy (xf_ND_ empty)
  void lm_head_bf16(int N, int D, int V);
  GemmOperand xf_operand() const;  // xf for the bf16 LM-head products
  std::vector<SublayerActs<T>> acts_;
  CcaScratch<T> cca_scratch_;
  MoeScratch<T> moe_scratch_;
  std::vector<T> dh_[2], dres_[2], dx_ND_, dxf_ND_, dr_carry_NR_;
  RopeTable rope_;
  std::unique_ptr<ExpertCompute<T>> experts_;
  std::unique_ptr<SeqShard<T>> shard_;
  std::vector<size_t> sub_begin_;  // lowest parameter offset of each sub-layer (for grads_ready)
  // Gradient spans not written by a product with beta = 0 under GradMode::Overwrite: [begin,
  // end) pairs, zeroed before such a backward.
  std::vector<std::pair<size_t, size_t>> zeroed_on_overwrite_;
  int count_ = 0;
  bool decoded_ = false;
  double aux_coeff_ = 0;
  bool bf16_current_ = false;    // marked current by the caller
  std::unique_ptr<SplitMaster> split_;  // use_split_master(true)
  bool split_encoded_ = false;          // params' product weights are split now
  std::vector<Bf16Mirror> weight_mirrors() const;  // the bf16 weights the products read, if any
  bool bf16_for_backward_ = false;  // the last forward read bf16 weights (params_bf16 or split)
  // With bf16 GEMMs: the norms' outputs (each sub-layer's x, the final xf) in bf16, written by
  // the norms and listed as activation mirrors (kernels/gemm.h) for forward and backward, or,
  // where only products read them (an attention sub-layer's x, xf before bf16 logits), kept
  // only here and passed to the products as bf16 operands.
  std::vector<std::vector<bf16>> x16_;
  std::vector<Bf16Mirror> act_mirrors_;
  size_t x16_count_ = 0;
};

}  // namespace zaya
