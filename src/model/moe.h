// MoE sub-layer with the ZAYA1 router (spec section 4): router (down-projection, EDA,
// RMSNorm, 3-layer GELU MLP, softmax, biased top-k with MoD skip class), dropless dispatch
// (tokens grouped by expert, one GEMM per expert), SwiGLU experts, gated combine.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/bf16.h"

#include "model/params.h"

namespace zaya {

// Expert-dispatch seam: "here are token rows grouped by expert; give me their outputs".
// Local: a loop of GEMMs over this process's experts. Expert parallel wraps the same call
// in an all-to-all-v (parallel/expert_parallel.h). `counts[e]` rows for global expert e, in expert order.
template <class T>
struct ExpertCompute {
  virtual ~ExpertCompute() = default;
  virtual void resize(const ModelConfig& c, int max_rows) = 0;
  // moe_index: which MoE sub-layer (0-based among MoE sub-layers).
  virtual void forward(int moe_index, const int64_t* counts, const T* x_SD, T* y_SD, const T* W,
                       const MoeOffsets& o) = 0;
  // Writes dx_SD (overwrites); the expert weight gradients into dW as `mode` says (Overwrite:
  // every expert this process holds, one without rows gets zeros).
  virtual void backward(int moe_index, const int64_t* counts, const T* x_SD, const T* dy_SD, T* dx_SD, const T* W,
                        T* dW, const MoeOffsets& o, GradMode mode) = 0;
};

// Runs every expert in this process: u = x fc1^T; a = silu(u_gate) * u_up; y = a fc2^T.
template <class T>
struct LocalExperts : ExpertCompute<T> {
  ExpertRange range;
  std::vector<std::vector<T>> u_SF, a_SH;  // per MoE sub-layer, saved for backward
  std::vector<T> da_SH, du_SF;             // scratch
  // With activation copies on (bf16 products), a and du are kept in bf16 only, written by
  // SwiGLU and read by the products as stored; a_SH and du_SF are then empty.
  std::vector<std::vector<bf16>> a16_SH;
  std::vector<bf16> du16_SF;
  int rows = 0;  // max_rows of resize()
  int num_moe = 0;
  int D = 0, F = 0;
  explicit LocalExperts(ExpertRange r, int num_moe_layers) : range(r), num_moe(num_moe_layers) {}
  void resize(const ModelConfig& c, int max_rows) override;
  void forward(int moe_index, const int64_t* counts, const T* x, T* y, const T* W, const MoeOffsets& o) override;
  void backward(int moe_index, const int64_t* counts, const T* x, const T* dy, T* dx, const T* W, T* dW,
                const MoeOffsets& o, GradMode mode) override;
};

// Saved per MoE sub-layer, sized once per (B, T).
template <class T>
struct MoeSaved {
  std::vector<T> r_NR;              // router state after EDA (passed on as r_prev)
  std::vector<T> rstd_N, zn_NR;     // rmsnorm_eda
  std::vector<T> pre0_NR, h0_NR, pre2_NR, h2_NR;
  std::vector<T> prob_NE;           // softmax over classes
  std::vector<int32_t> choice_NK;   // chosen class per slot (after the MoD rule)
  std::vector<T> gate_NK;
  std::vector<int64_t> slot_row_NK; // row of the slot in the expert-sorted arrays, -1 for skip
  std::vector<int64_t> counts_E;    // rows per routed expert (global expert index)
  std::vector<int64_t> class_counts;// tokens per class incl. skip (load statistics)
  std::vector<double> class_prob;   // per class, its probability summed over the tokens
  std::vector<T> xs_SD, ys_SD;      // expert-sorted inputs and outputs
  std::vector<bf16> xs16_SD;        // xs in bf16, from x's copy (bf16 products only)
  bool xs16_valid = false;          // the last forward wrote xs16_SD
  double min_margin = 1e300;        // smallest gap between the k-th and (k+1)-th biased score
  double aux_coeff = 0;             // Switch load-balancing loss coefficient (0: off)
  double aux_loss = 0;              // coeff * NC * sum_e f_e * P_e of the last forward
  void resize(const ModelConfig& c, int N);
};

template <class T>
struct MoeScratch {
  std::vector<T> dys_SD, dxs_SD, dgate_NK, dprob_NE, dlogit_NE, dh2_NR, dh0_NR, dzn_NR, dr_NR;
  std::vector<bf16> dys16_SD;  // dys in bf16 (bf16 products only)
  void resize(const ModelConfig& c, int N);
};

// Steps of moe_forward that the in-place inference path (model/infer.cpp) runs as they are,
// around its own products and experts.
// The router's small tensors: biases, norm weight, EDA scale (nullable), balancing biases.
template <class T>
struct RouterVectors {
  const T *down_b, *eda, *norm, *mlp0_b, *mlp2_b, *balancing_bias;
};
// The router's activations [N, R] (prob [N, NC]; choice, gate [N, K]).
template <class T>
struct RouterActs {
  T *r, *zn, *rstd, *h0, *pre0, *h2, *pre2, *prob;
  int32_t* choice;
  T* gate;
};
// The router MLP's products, left to the caller (the model's GEMMs, inference's stored
// weights): y [N, R] (NC for Mlp4) = x [N, R] W^T. A non-owning reference to a callable.
enum class RouterMatrix { Mlp0, Mlp2, Mlp4 };
template <class T>
class RouterProduct {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, RouterProduct>)
  RouterProduct(F&& f)  // implicit: a lambda passes as the argument, as to std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))), call_([](void* o, RouterMatrix m, T* y, const T* x) {
          (*static_cast<std::remove_reference_t<F>*>(o))(m, y, x);
        }) {}
  void operator()(RouterMatrix m, T* y, const T* x) const { call_(obj_, m, y, x); }

 private:
  void* obj_;
  void (*call_)(void*, RouterMatrix, T*, const T*);
};
// The router after its down-projection (spec section 4): r [N, R], the product on entry, gets
// the down bias and the EDA term of r_prev (nullable: the first MoE sub-layer), then RMSNorm,
// 2 x (linear + GELU), the class logits, softmax, and the biased top-k with the MoD rule.
// Returns the smallest gap to a routing tie over the N tokens.
template <class T>
double moe_router(const RouterActs<T>& a, const T* r_prev, const RouterVectors<T>& w, const ModelConfig& c, int N,
                  RouterProduct<T> product);
// moe_router's steps around its products, for a caller that runs the products itself
// (decode's team). router_input: r = r_in + down bias (+ EDA of r_prev), then zn = RMSNorm(r)
// (r may be r_in). router_choice: prob [N, NC] holds the class logits on entry; softmax in
// place and the biased top-k (balancing_bias [NC]) with the MoD rule into choice and gate
// [N, K]; returns the smallest gap.
template <class T>
void router_input(T* r_NR, T* zn_NR, T* rstd_N, const T* r_in_NR, const T* r_prev_NR, const RouterVectors<T>& w,
                  const ModelConfig& c, int N);
template <class T>
double router_choice(T* prob_NC, int32_t* choice_NK, T* gate_NK, const T* balancing_bias, const ModelConfig& c, int N);
// Dropless dispatch, a stable counting sort of the routed slots by expert: counts_E [E] rows
// per expert, class_counts [NC] (nullable) tokens per class incl. skip, slot_row [N*K] the
// slot's row in the expert-sorted arrays (-1 for the skip class).
void moe_dispatch(const int32_t* choice_NK, const ModelConfig& c, int N, int64_t* counts_E, int64_t* class_counts,
                  int64_t* slot_row_NK);
// xs [routed rows, D]: each routed slot's token row of x [N, D]; with x16, xs16 the same rows
// of x's bf16 copy.
template <class T>
void moe_gather(T* xs_SD, const T* x_ND, const int64_t* slot_row_NK, int N, int K, int D, const bf16* x16 = nullptr,
                bf16* xs16 = nullptr);
// out [N, D] = sum over slots of gate * (the expert's output row of ys, or x for the skip class).
template <class T>
void moe_combine(T* out_ND, const T* x_ND, const T* ys_SD, const T* gate_NK, const int64_t* slot_row_NK, int N,
                 int K, int D);

// Biased top-k with the MoD rule for one token (prob [NC] after softmax, bias [NC]): chosen
// classes and gates [K]; returns the gap to the best unchosen class (moe_router runs it per token).
template <class T>
double route_token(const T* prob, const T* bias, int NC, int K, int skip, int32_t* choice, T* gate);

// r_prev: the previous MoE sub-layer's r (nullptr for the first one). Writes out_ND.
template <class T>
void moe_forward(T* out, const T* x, const T* r_prev, const T* W, const T* balancing_bias, const MoeOffsets& o,
                 const ModelConfig& c, int N, int moe_index, MoeSaved<T>& s, ExpertCompute<T>& experts);
// Writes dx (overwrites) and accumulates into dW. dr_carry [N, R]: on entry the gradient
// flowing into this layer's r from the next MoE sub-layer's EDA (zeros for the last); on exit
// the gradient for the previous layer's r.
template <class T>
void moe_backward(T* dx, T* dW, T* dr_carry, const T* dout, const T* x, const T* r_prev, const T* W,
                  const MoeOffsets& o, const ModelConfig& c, int N, int moe_index, const MoeSaved<T>& s,
                  MoeScratch<T>& k, ExpertCompute<T>& experts, double aux_scale = 1.0,
                  GradMode experts_mode = GradMode::Accumulate);

}  // namespace zaya
