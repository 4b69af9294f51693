#include "model/moe.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/error.h"
#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/activations.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"

namespace zaya {

// ---------------------------------------------------------------- local experts

template <class T>
void LocalExperts<T>::resize(const ModelConfig& c, int max_rows) {
  D = c.hidden_size;
  F = c.ffn_hidden_size;
  rows = max_rows;
  u_SF.assign(num_moe, std::vector<T>(size_t(max_rows) * F));
  da_SH.assign(size_t(max_rows) * F / 2, 0);
  // a and du exist in fp32 or in bf16, as the products are (allocated by forward/backward).
  a_SH.assign(num_moe, {});
  du_SF.clear();
  a16_SH.assign(num_moe, {});
  du16_SF.clear();
}

// With activation copies on (bf16 products), a and du are kept only in bf16: SwiGLU writes
// them and the products read them as stored (gemm_bf16). Otherwise fp32, through gemm().
template <class T>
static bool bf16_only() {
  if constexpr (std::is_same_v<T, float>) return gemm_activation_copies_on();
  return false;
}

// Rows [r0, r1) of expert e, whose first row is row0 in the expert-sorted arrays.
struct ExpertPiece {
  int e, r0, r1;
  size_t row0;
};

// Whether the experts' products run one per thread inside a team (our kernels and OpenBLAS run
// a product on the calling thread alone there; oneDNN's are serialised, and the gradient
// checks' doubles run in order).
template <class T>
static int expert_team() {
  if constexpr (std::is_same_v<T, float>) {
    if (!omp_in_parallel() && gemm_concurrent_ok()) return omp_get_max_threads();
  }
  return 1;
}

// The experts' rows, concatenated in expert order, cut into P runs of equal length, one per
// thread (cuts inside an expert at a multiple of 16 rows). An expert cut in two is run by the
// threads on either side of the cut, each on its own rows. Rows are independent and our
// kernels sum each element in one order whatever M is, so the results are those of whole
// experts.
static std::vector<std::vector<ExpertPiece>> expert_pieces(const ExpertRange& range, const int64_t* counts, int P) {
  int64_t total = 0;
  for (int e = range.begin; e < range.end; ++e) total += counts[e];
  std::vector<std::vector<ExpertPiece>> plan(static_cast<size_t>(P));
  int64_t pos = 0;  // first row of expert e among all
  size_t row0 = 0;
  int t = 0;
  for (int e = range.begin; e < range.end; ++e) {
    const int64_t n = counts[e];
    for (int64_t r = 0; r < n;) {
      const int64_t end = t == P - 1 ? n : total * (t + 1) / P - pos;  // thread t's last row + 1, here
      if (end >= n) {
        plan[size_t(t)].push_back({e, int(r), int(n), row0});
        break;
      }
      const int64_t c = std::clamp<int64_t>((end + 8) / 16 * 16, r, n);
      if (c > r) plan[size_t(t)].push_back({e, int(r), int(c), row0});
      r = c;
      ++t;
    }
    pos += n;
    row0 += size_t(n);
  }
  return plan;
}

// The rows of the busiest of P threads taking whole experts, largest first, each to the
// thread with the fewest rows so far (what a dynamic schedule does at equal speeds).
// `whole` is sorted largest first.
static int64_t whole_experts_makespan(const std::vector<ExpertPiece>& whole, int P) {
  std::vector<int64_t> load(size_t(P), 0);
  for (const ExpertPiece& p : whole) *std::min_element(load.begin(), load.end()) += p.r1;
  return *std::max_element(load.begin(), load.end());
}

// Runs this process's experts with rows: rows(piece) for the work on a piece's own rows, then
// grads(piece) for the weight gradients, which sum over all of an expert's rows.
// - One thread, or products that cannot run one per thread (expert_team): whole expert after
//   whole expert, each product split over the threads.
// - Routings that whole experts balance (the busiest thread within 5% of an equal share):
//   whole experts side by side, largest first, each taken by the next free thread (dynamic:
//   this also evens out threads of unequal speed, the VM's two vCPUs run up to 10% apart).
// - Else (an expert holding most of the rows: zaya1-small at 2 threads left one thread idle
//   for 40% of such a layer) the rows cut into equal runs, one per thread (expert_pieces). A
//   piece cut out of an expert takes the share of the expert's weight gradients that goes
//   with its rows (share_of), once every piece of the expert has its rows done: each thread
//   runs its cut pieces' rows first, its whole experts next and its cut gradients last, so it
//   rarely waits (a barrier after the cut rows left one idle for the pieces' difference).
// On the team the region is timed as one GemmRegion of `flops_per_row` times the rows.
template <class T, class Rows, class Grads>
static void run_experts(const ExpertRange& range, const int64_t* counts, double flops_per_row, Rows&& rows,
                        Grads&& grads) {
  const int P = expert_team<T>();
  std::vector<ExpertPiece> whole;
  int64_t total = 0;
  size_t row0 = 0;
  for (int e = range.begin; e < range.end; ++e) {
    if (counts[e] > 0) whole.push_back({e, 0, int(counts[e]), row0});
    row0 += size_t(counts[e]);
    total += counts[e];
  }
  if (P <= 1) {
    for (const ExpertPiece& p : whole) rows(p), grads(p);
    return;
  }
  std::stable_sort(whole.begin(), whole.end(), [](const ExpertPiece& a, const ExpertPiece& b) { return a.r1 > b.r1; });
  if (whole_experts_makespan(whole, P) * 100 <= total * 105 / P) {
    gemm_side_by_side(int(whole.size()), flops_per_row * double(total), [&](int i) {
      rows(whole[size_t(i)]);
      grads(whole[size_t(i)]);
    });
    return;
  }
  GemmRegion region(flops_per_row * double(total));
  const auto plan = expert_pieces(range, counts, P);
  const int E = range.end - range.begin;
  std::vector<int> pieces(size_t(E), 0);
  for (const auto& mine : plan)
    for (const ExpertPiece& p : mine) ++pieces[size_t(p.e - range.begin)];
  std::unique_ptr<std::atomic<int>[]> done(new std::atomic<int>[size_t(E)]);
  for (int i = 0; i < E; ++i) done[size_t(i)].store(0);
  auto cut = [&](const ExpertPiece& p) { return pieces[size_t(p.e - range.begin)] > 1; };
#pragma omp parallel num_threads(P)
  {
    const auto& mine = plan[size_t(omp_get_thread_num())];
    for (const ExpertPiece& p : mine)
      if (cut(p)) rows(p), done[size_t(p.e - range.begin)].fetch_add(1, std::memory_order_release);
    for (const ExpertPiece& p : mine)
      if (!cut(p)) rows(p), grads(p);
    for (const ExpertPiece& p : mine)
      if (cut(p)) {
        const std::atomic<int>& d = done[size_t(p.e - range.begin)];
        while (d.load(std::memory_order_acquire) < pieces[size_t(p.e - range.begin)]) std::this_thread::yield();
        grads(p);
      }
  }
}

// The part of `m` output rows that goes with rows [r0, r1) of n (multiples of 16 inside):
// the pieces of one expert tile [0, m).
static std::pair<int, int> share_of(int m, int n, int r0, int r1) {
  auto at = [&](int r) { return r >= n ? m : int(int64_t(m) * r / n / 16 * 16); };
  return {at(r0), at(r1)};
}

template <class T>
void LocalExperts<T>::forward(int mi, const int64_t* counts, const T* x, T* y, const T* W, const MoeOffsets& o) {
  const int H = F / 2;
  const bool b16 = bf16_only<T>();
  auto& a_all = a_SH[size_t(mi)];
  auto& a16_all = a16_SH[size_t(mi)];
  if (b16) {
    a_all = {};
    a16_all.resize(size_t(rows) * H);
  } else {
    a16_all = {};
    a_all.resize(size_t(rows) * H);
  }
  run_experts<T>(
      range, counts, 2.0 * (double(F) * D + double(D) * H),
      [&](const ExpertPiece& p) {
        const int n = p.r1 - p.r0;
        const size_t row = p.row0 + size_t(p.r0), le = size_t(p.e - range.begin);
        T* u = u_SF[mi].data() + row * F;
        gemm(Trans::N, Trans::T, n, F, D, T(1), x + row * D, D, W + o.fc1[le], D, T(0), u, F);
        if constexpr (std::is_same_v<T, float>) {
          if (b16) {
            bf16* a16 = a16_all.data() + row * H;
            swiglu_forward((T*)nullptr, u, n, F, a16);
            gemm_bf16(Trans::N, Trans::T, n, D, H, 1.f, {nullptr, a16, H}, {W + o.fc2[le], nullptr, H}, 0.f,
                      y + row * D, D);
            return;
          }
        }
        T* a = a_all.data() + row * H;
        swiglu_forward(a, u, n, F);
        gemm(Trans::N, Trans::T, n, D, H, T(1), a, H, W + o.fc2[le], H, T(0), y + row * D, D);
      },
      [](const ExpertPiece&) {});  // no weight gradients forward
}

template <class T>
void LocalExperts<T>::backward(int mi, const int64_t* counts, const T* x, const T* dy, T* dx, const T* W, T* dW,
                               const MoeOffsets& o, GradMode mode) {
  const int H = F / 2;
  const bool overwrite = mode == GradMode::Overwrite;
  const T beta = overwrite ? T(0) : T(1);  // of the weight-gradient products
  if (overwrite)  // an expert without rows has no product to write its zeros
    for (int e = range.begin; e < range.end; ++e)
      if (counts[e] == 0) {
        const size_t le = size_t(e - range.begin);
        std::fill_n(dW + o.fc1[le], size_t(F) * D, T(0));
        std::fill_n(dW + o.fc2[le], size_t(D) * H, T(0));
      }
  const bool b16 = bf16_only<T>() && a16_SH[size_t(mi)].size() == size_t(rows) * H;
  ZAYA_CHECK(b16 || a_SH[size_t(mi)].size() == size_t(rows) * H,
             "experts: backward in another precision than its forward");
  if (b16) {
    du_SF = {};
    du16_SF.resize(size_t(rows) * F);
  } else {
    du16_SF = {};
    du_SF.resize(size_t(rows) * F);
  }
  // The weight gradients of expert e over all its n rows: rows [f0, f1) of fc1's, [d0, d1) of
  // fc2's (a piece of an expert cut over threads takes its share of both).
  auto weight_grads = [&](int e, size_t row, int n, int f0, int f1, int d0, int d1) {
    const size_t le = size_t(e - range.begin);
    const T* dye = dy + row * D;
    if constexpr (std::is_same_v<T, float>) {
      if (b16) {
        const bf16* a16 = a16_SH[size_t(mi)].data() + row * H;
        const bf16* du16 = du16_SF.data() + row * F;
        gemm_bf16(Trans::T, Trans::N, d1 - d0, H, n, 1.f, {dye + d0, nullptr, D}, {nullptr, a16, H}, float(beta),
                  dW + o.fc2[le] + size_t(d0) * H, H);
        gemm_bf16(Trans::T, Trans::N, f1 - f0, D, n, 1.f, {nullptr, du16 + f0, F}, {x + row * D, nullptr, D},
                  float(beta), dW + o.fc1[le] + size_t(f0) * D, D);
        return;
      }
    }
    const T* a = a_SH[mi].data() + row * H;
    const T* du = du_SF.data() + row * F;
    gemm(Trans::T, Trans::N, d1 - d0, H, n, T(1), dye + d0, D, a, H, beta, dW + o.fc2[le] + size_t(d0) * H, H);
    gemm(Trans::T, Trans::N, f1 - f0, D, n, T(1), du + f0, F, x + row * D, D, beta, dW + o.fc1[le] + size_t(f0) * D,
         D);
  };
  // A piece's rows: da (scratch at the piece's own rows), du, dx; then its share of the
  // weight gradients (all of them for a whole expert).
  run_experts<T>(
      range, counts, 4.0 * (double(F) * D + double(D) * H),
      [&](const ExpertPiece& p) {
        const int n = p.r1 - p.r0;
        const size_t row = p.row0 + size_t(p.r0), le = size_t(p.e - range.begin);
        const T* u = u_SF[mi].data() + row * F;
        T* da = da_SH.data() + row * H;
        gemm(Trans::N, Trans::N, n, H, D, T(1), dy + row * D, D, W + o.fc2[le], H, T(0), da, H);
        if constexpr (std::is_same_v<T, float>) {
          if (b16) {
            bf16* du16 = du16_SF.data() + row * F;
            swiglu_backward((T*)nullptr, da, u, n, F, du16);
            gemm_bf16(Trans::N, Trans::N, n, D, F, 1.f, {nullptr, du16, F}, {W + o.fc1[le], nullptr, D}, 0.f,
                      dx + row * D, D);
            return;
          }
        }
        T* du = du_SF.data() + row * F;
        swiglu_backward(du, da, u, n, F);
        gemm(Trans::N, Trans::N, n, D, F, T(1), du, F, W + o.fc1[le], D, T(0), dx + row * D, D);
      },
      [&](const ExpertPiece& p) {
        const int n = int(counts[p.e]);
        const auto [f0, f1] = share_of(F, n, p.r0, p.r1);
        const auto [d0, d1] = share_of(D, n, p.r0, p.r1);
        weight_grads(p.e, p.row0, n, f0, f1, d0, d1);
      });
}


// ---------------------------------------------------------------- router + dispatch

template <class T>
void MoeSaved<T>::resize(const ModelConfig& c, int N) {
  const size_t R = c.router_hidden, NC = c.num_classes(), K = c.topk, S = size_t(N) * K, D = c.hidden_size;
  for (auto* v : {&r_NR, &zn_NR, &pre0_NR, &h0_NR, &pre2_NR, &h2_NR}) v->assign(size_t(N) * R, 0);
  rstd_N.assign(N, 0);
  prob_NE.assign(size_t(N) * NC, 0);
  choice_NK.assign(S, 0);
  gate_NK.assign(S, 0);
  slot_row_NK.assign(S, -1);
  counts_E.assign(c.num_experts, 0);
  class_counts.assign(NC, 0);
  class_prob.assign(NC, 0.0);
  xs_SD.assign(S * D, 0);
  ys_SD.assign(S * D, 0);
}

template <class T>
void MoeScratch<T>::resize(const ModelConfig& c, int N) {
  const size_t R = c.router_hidden, NC = c.num_classes(), K = c.topk, S = size_t(N) * K, D = c.hidden_size;
  dys_SD.assign(S * D, 0);
  dxs_SD.assign(S * D, 0);
  dgate_NK.assign(S, 0);
  dprob_NE.assign(size_t(N) * NC, 0);
  dlogit_NE.assign(size_t(N) * NC, 0);
  for (auto* v : {&dh2_NR, &dh0_NR, &dzn_NR, &dr_NR}) v->assign(size_t(N) * R, 0);
}

// Biased top-k with the MoD rule; returns the gap between the k-th chosen biased score and
// the best unchosen one (how far this token is from a routing tie).
template <class T>
double route_token(const T* prob, const T* bias, int NC, int K, int skip, int32_t* choice, T* gate) {
  bool taken[256] = {};
  double kth = 0;
  for (int kk = 0; kk < K; ++kk) {
    int best = -1;
    double bv = 0;
    for (int e = 0; e < NC; ++e) {
      if (taken[e]) continue;
      const double v = double(prob[e]) + double(bias[e]);
      if (best < 0 || v > bv) { best = e; bv = v; }
    }
    taken[best] = true;
    choice[kk] = best;
    kth = bv;
  }
  double next = -1e300;
  for (int e = 0; e < NC; ++e)
    if (!taken[e]) next = std::max(next, double(prob[e]) + double(bias[e]));
  bool skipped = false;
  for (int kk = 0; kk < K; ++kk) {
    if (skipped) choice[kk] = skip;
    skipped = skipped || choice[kk] == skip;
    gate[kk] = prob[choice[kk]];
  }
  return next > -1e300 ? kth - next : 1e300;
}

template <class T>
void router_input(T* r, T* zn, T* rstd, const T* r_in, const T* r_prev, const RouterVectors<T>& w,
                  const ModelConfig& c, int N) {
  const int R = c.router_hidden;
  parallel_for(N, [&](int64_t i) {
    for (int j = 0; j < R; ++j) {
      T v = r_in[size_t(i) * R + j] + w.down_b[j];
      if (w.eda && r_prev) v += w.eda[j] * r_prev[size_t(i) * R + j];
      r[size_t(i) * R + j] = v;
    }
  });
  rmsnorm_forward(zn, rstd, r, w.norm, N, R, c.router_norm_eps);
}

template <class T>
double router_choice(T* prob, int32_t* choice, T* gate, const T* balancing_bias, const ModelConfig& c, int N) {
  const int NC = c.num_classes(), K = c.topk, skip = c.use_mod ? c.num_experts : -1;
  softmax_forward(prob, prob, N, NC);
  // Choice (biases steer it, gradient flows through the gate only). Inside a region (decode's
  // team) one thread routes every token: a nested region costs more than the loop.
  auto route = [&](int i) {
    return route_token(prob + size_t(i) * NC, balancing_bias, NC, K, skip, choice + size_t(i) * K,
                       gate + size_t(i) * K);
  };
  double margin = 1e300;
  if (omp_in_parallel()) {
    for (int i = 0; i < N; ++i) margin = std::min(margin, route(i));
  } else {
#pragma omp parallel for schedule(static) reduction(min : margin)
    for (int i = 0; i < N; ++i) margin = std::min(margin, route(i));
  }
  return margin;
}

template <class T>
double moe_router(const RouterActs<T>& a, const T* r_prev, const RouterVectors<T>& w, const ModelConfig& c, int N,
                  RouterProduct<T> product) {
  const int R = c.router_hidden;
  router_input(a.r, a.zn, a.rstd, a.r, r_prev, w, c, N);
  product(RouterMatrix::Mlp0, a.h0, a.zn);
  bias_gelu_forward(a.h0, a.pre0, w.mlp0_b, N, R);
  product(RouterMatrix::Mlp2, a.h2, a.h0);
  bias_gelu_forward(a.h2, a.pre2, w.mlp2_b, N, R);
  product(RouterMatrix::Mlp4, a.prob, a.h2);
  return router_choice(a.prob, a.choice, a.gate, w.balancing_bias, c, N);
}

void moe_dispatch(const int32_t* choice, const ModelConfig& c, int N, int64_t* counts_E, int64_t* class_counts,
                  int64_t* rows) {
  const int K = c.topk, E = c.num_experts, skip = c.use_mod ? E : -1;
  std::fill(counts_E, counts_E + E, 0);
  if (class_counts) std::fill(class_counts, class_counts + c.num_classes(), 0);
  for (size_t q = 0; q < size_t(N) * K; ++q) {
    const int e = choice[q];
    if (class_counts) class_counts[e]++;
    if (e != skip) counts_E[e]++;
  }
  int64_t offs[256];
  for (int e = 0, acc = 0; e < E; ++e) { offs[e] = acc; acc += int(counts_E[e]); }
  for (size_t q = 0; q < size_t(N) * K; ++q) {
    const int e = choice[q];
    rows[q] = e == skip ? -1 : offs[e]++;
  }
}

template <class T>
void moe_gather(T* xs, const T* x, const int64_t* rows, int N, int K, int D, const bf16* x16, bf16* xs16) {
  parallel_for(int64_t(N) * K, [&](int64_t q) {
    if (rows[q] < 0) return;
    std::memcpy(xs + size_t(rows[q]) * D, x + size_t(q / K) * D, sizeof(T) * D);
    if (x16) std::memcpy(xs16 + size_t(rows[q]) * D, x16 + size_t(q / K) * D, sizeof(bf16) * D);
  });
}

template <class T>
void moe_combine(T* out, const T* x, const T* ys, const T* gate, const int64_t* rows, int N, int K, int D) {
  parallel_for(N, [&](int64_t i) {
    T* oi = out + size_t(i) * D;
    std::fill(oi, oi + D, T(0));
    for (int kk = 0; kk < K; ++kk) {
      const size_t q = size_t(i) * K + kk;
      const T g = gate[q];
      const T* src = rows[q] < 0 ? x + size_t(i) * D : ys + size_t(rows[q]) * D;
      for (int d = 0; d < D; ++d) oi[d] += g * src[d];
    }
  });
}

template <class T>
void moe_forward(T* out, const T* x, const T* r_prev, const T* W, const T* bias, const MoeOffsets& o,
                 const ModelConfig& c, int N, int mi, MoeSaved<T>& s, ExpertCompute<T>& experts) {
  const int D = c.hidden_size, R = c.router_hidden, NC = c.num_classes(), K = c.topk;
  const RouterOffsets& ro = o.router;
  // Router: r = down_proj(x) (+ EDA), z = rmsnorm_eda(r), 2 x (linear + GELU), softmax.
  std::optional<prof::Zone> zone;
  zone.emplace("router");
  gemm(Trans::N, Trans::T, N, R, D, T(1), x, D, W + ro.down_w, D, T(0), s.r_NR.data(), R);
  const RouterVectors<T> vectors{W + ro.down_b, ro.eda_scale != kNone ? W + ro.eda_scale : nullptr,
                                 W + ro.norm_w, W + ro.mlp0_b, W + ro.mlp2_b, bias};
  const RouterActs<T> acts{s.r_NR.data(),  s.zn_NR.data(), s.rstd_N.data(),  s.h0_NR.data(),   s.pre0_NR.data(),
                           s.h2_NR.data(), s.pre2_NR.data(), s.prob_NE.data(), s.choice_NK.data(), s.gate_NK.data()};
  s.min_margin = moe_router<T>(acts, r_prev, vectors, c, N, [&](RouterMatrix m, T* y, const T* in) {
    const size_t w = m == RouterMatrix::Mlp0 ? ro.mlp0_w : m == RouterMatrix::Mlp2 ? ro.mlp2_w : ro.mlp4_w;
    const int n_out = m == RouterMatrix::Mlp4 ? NC : R;
    gemm(Trans::N, Trans::T, N, n_out, R, T(1), in, R, W + w, R, T(0), y, n_out);
  });
  // Dropless dispatch.
  zone.reset();
  zone.emplace("dispatch+combine");
  moe_dispatch(s.choice_NK.data(), c, N, s.counts_E.data(), s.class_counts.data(), s.slot_row_NK.data());
  const T* prob = s.prob_NE.data();
  // The classes' probability sums (the balancer follows their means) and the optional
  // Switch-style auxiliary loss: coeff * NC * sum_e f_e * mean_i prob[i, e].
  std::fill(s.class_prob.begin(), s.class_prob.end(), 0.0);
  for (int i = 0; i < N; ++i)
    for (int e = 0; e < NC; ++e) s.class_prob[size_t(e)] += double(prob[size_t(i) * NC + e]);
  s.aux_loss = 0;
  if (s.aux_coeff > 0) {
    for (int e = 0; e < NC; ++e)
      s.aux_loss += double(s.class_counts[e]) / (double(N) * K) * s.class_prob[size_t(e)] / N;
    s.aux_loss *= s.aux_coeff * NC;
  }
  // With bf16 products, x's copy (written by the norm) is gathered alongside: xs16 feeds fc1
  // forward and its dW product without rounding.
  const bf16* x16 = nullptr;
  if constexpr (std::is_same_v<T, float>)
    if (gemm_activation_copies_on()) x16 = gemm_activation_copy(x, size_t(N) * D);
  s.xs16_valid = x16 != nullptr;
  if (x16) s.xs16_SD.resize(s.xs_SD.size());
  moe_gather(s.xs_SD.data(), x, s.slot_row_NK.data(), N, K, D, x16, x16 ? s.xs16_SD.data() : nullptr);
  zone.reset();
  zone.emplace("experts");
  {
    std::optional<ActivationMirrorScope> mirror;
    if constexpr (std::is_same_v<T, float>)
      if (x16) mirror.emplace(std::initializer_list<Bf16Mirror>{{s.xs_SD.data(), s.xs_SD.size(), s.xs16_SD.data()}});
    experts.forward(mi, s.counts_E.data(), s.xs_SD.data(), s.ys_SD.data(), W, o);
  }
  zone.reset();
  zone.emplace("dispatch+combine");
  moe_combine(out, x, s.ys_SD.data(), s.gate_NK.data(), s.slot_row_NK.data(), N, K, D);
}

template <class T>
void moe_backward(T* dx, T* dW, T* dr_carry, const T* dout, const T* x, const T* r_prev, const T* W,
                  const MoeOffsets& o, const ModelConfig& c, int N, int mi, const MoeSaved<T>& s, MoeScratch<T>& k,
                  ExpertCompute<T>& experts, double aux_scale, GradMode experts_mode) {
  const int D = c.hidden_size, R = c.router_hidden, NC = c.num_classes(), K = c.topk;
  const RouterOffsets& ro = o.router;
  const auto& rows = s.slot_row_NK;
  // Combine backward: gate gradients and expert-output gradients (dys also in bf16 for the
  // two fc2 products, with bf16 products on).
  std::optional<prof::Zone> zone;
  zone.emplace("dispatch+combine");
  bf16* dys16 = nullptr;
  if constexpr (std::is_same_v<T, float>)
    if (gemm_activation_copies_on()) {
      k.dys16_SD.resize(k.dys_SD.size());
      dys16 = k.dys16_SD.data();
    }
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* gi = dout + size_t(i) * D;
    for (int kk = 0; kk < K; ++kk) {
      const size_t q = size_t(i) * K + kk;
      const T* src = rows[q] < 0 ? x + size_t(i) * D : &s.ys_SD[size_t(rows[q]) * D];
      T dot = 0;
#pragma omp simd reduction(+ : dot)  // lanes, not a scalar chain of D dependent adds
      for (int d = 0; d < D; ++d) dot += gi[d] * src[d];
      k.dgate_NK[q] = dot;
      if (rows[q] >= 0) {
        T* dy = &k.dys_SD[size_t(rows[q]) * D];
        for (int d = 0; d < D; ++d) dy[d] = s.gate_NK[q] * gi[d];
        if (dys16)
          for (int d = 0; d < D; ++d) dys16[size_t(rows[q]) * D + d] = to_bf16(float(dy[d]));
      }
    }
  }
  zone.reset();
  zone.emplace("experts");
  {
    std::optional<ActivationMirrorScope> mirror;
    if constexpr (std::is_same_v<T, float>)
      if (dys16)
        mirror.emplace(std::initializer_list<Bf16Mirror>{
            {k.dys_SD.data(), k.dys_SD.size(), dys16},
            {s.xs_SD.data(), s.xs_SD.size(), s.xs16_valid ? s.xs16_SD.data() : nullptr}});
    experts.backward(mi, s.counts_E.data(), s.xs_SD.data(), k.dys_SD.data(), k.dxs_SD.data(), W, dW, o,
                     experts_mode);
  }
  zone.reset();
  zone.emplace("dispatch+combine");
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    T* dxi = dx + size_t(i) * D;
    for (int kk = 0; kk < K; ++kk) {
      const size_t q = size_t(i) * K + kk;
      // A routed entry brings its expert's dx row, a skipped one its gate times dout. Every row
      // has K entries: the first stores (dx is written, not accumulated), the rest add.
      const bool routed = rows[q] >= 0;
      const T* src = routed ? &k.dxs_SD[size_t(rows[q]) * D] : dout + size_t(i) * D;
      const T g = routed ? T(1) : s.gate_NK[q];
      if (kk == 0)
        for (int d = 0; d < D; ++d) dxi[d] = g * src[d];
      else
        for (int d = 0; d < D; ++d) dxi[d] += g * src[d];
    }
  }
  // Router backward.
  zone.reset();
  zone.emplace("router");
  T* dprob = k.dprob_NE.data();
  std::fill(k.dprob_NE.begin(), k.dprob_NE.end(), T(0));
  for (size_t q = 0; q < size_t(N) * K; ++q) dprob[(q / K) * NC + s.choice_NK[q]] += k.dgate_NK[q];
  if (s.aux_coeff > 0)  // d aux / d prob[i, e] = coeff * NC * f_e / N, scaled like the main loss
    for (int e = 0; e < NC; ++e) {
      const T g = T(s.aux_coeff * NC * double(s.class_counts[e]) / (double(N) * K) / N * aux_scale);
      for (int i = 0; i < N; ++i) dprob[size_t(i) * NC + e] += g;
    }
  T* dlogit = k.dlogit_NE.data();
  softmax_backward(dlogit, dprob, s.prob_NE.data(), N, NC);
  T* dh2 = k.dh2_NR.data();
  T* dh0 = k.dh0_NR.data();
  // Each layer's input and weight gradients side by side (N = 2048, R = 128 in zaya1-small).
  gemm_grads_side_by_side<T>(4.0 * N * R * NC, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, N, R, NC, T(1), dlogit, NC, W + ro.mlp4_w, R, T(0), dh2, R);
    gemm(Trans::T, Trans::N, NC, R, N, T(1), dlogit, NC, s.h2_NR.data(), R, T(1), dW + ro.mlp4_w, R);
  });
  gelu_backward(dh2, dh2, s.pre2_NR.data(), size_t(N) * R);
  colsum_product(dW + ro.mlp2_b, dh2, (const T*)nullptr, N, R, R, 0);
  gemm_grads_side_by_side<T>(4.0 * N * R * R, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, N, R, R, T(1), dh2, R, W + ro.mlp2_w, R, T(0), dh0, R);
    gemm(Trans::T, Trans::N, R, R, N, T(1), dh2, R, s.h0_NR.data(), R, T(1), dW + ro.mlp2_w, R);
  });
  gelu_backward(dh0, dh0, s.pre0_NR.data(), size_t(N) * R);
  colsum_product(dW + ro.mlp0_b, dh0, (const T*)nullptr, N, R, R, 0);
  T* dzn = k.dzn_NR.data();
  gemm_grads_side_by_side<T>(4.0 * N * R * R, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, N, R, R, T(1), dh0, R, W + ro.mlp0_w, R, T(0), dzn, R);
    gemm(Trans::T, Trans::N, R, R, N, T(1), dh0, R, s.zn_NR.data(), R, T(1), dW + ro.mlp0_w, R);
  });
  // dr = (gradient from the next layer's EDA) + rmsnorm_eda backward.
  T* dr = k.dr_NR.data();
  std::memcpy(dr, dr_carry, sizeof(T) * size_t(N) * R);
  rmsnorm_backward(dr, dW + ro.norm_w, dzn, s.r_NR.data(), W + ro.norm_w, s.rstd_N.data(), N, R);
  if (ro.eda_scale != kNone && r_prev) {
    colsum_product(dW + ro.eda_scale, dr, r_prev, N, R, R, R);
    const T* sc = W + ro.eda_scale;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < R; ++j) dr_carry[size_t(i) * R + j] = dr[size_t(i) * R + j] * sc[j];
  } else {
    std::fill(dr_carry, dr_carry + size_t(N) * R, T(0));
  }
  colsum_product(dW + ro.down_b, dr, (const T*)nullptr, N, R, R, 0);
  gemm_grads_side_by_side<T>(4.0 * N * D * R, [&](int i) {
    if (i == 0) return gemm(Trans::N, Trans::N, N, D, R, T(1), dr, R, W + ro.down_w, D, T(1), dx, D);
    gemm(Trans::T, Trans::N, R, D, N, T(1), dr, R, x, D, T(1), dW + ro.down_w, D);
  });
}

#define ZAYA_INST(T)                                                                                              \
  template double route_token<T>(const T*, const T*, int, int, int, int32_t*, T*);                              \
  template void router_input<T>(T*, T*, T*, const T*, const T*, const RouterVectors<T>&, const ModelConfig&, int); \
  template double router_choice<T>(T*, int32_t*, T*, const T*, const ModelConfig&, int);                          \
  template double moe_router<T>(const RouterActs<T>&, const T*, const RouterVectors<T>&, const ModelConfig&, int, \
                                RouterProduct<T>);                                                                \
  template void moe_gather<T>(T*, const T*, const int64_t*, int, int, int, const bf16*, bf16*);                   \
  template void moe_combine<T>(T*, const T*, const T*, const T*, const int64_t*, int, int, int);                  \
  template struct LocalExperts<T>;                                                                                \
  template struct MoeSaved<T>;                                                                                    \
  template struct MoeScratch<T>;                                                                                  \
  template void moe_forward<T>(T*, const T*, const T*, const T*, const T*, const MoeOffsets&, const ModelConfig&,  \
                               int, int, MoeSaved<T>&, ExpertCompute<T>&);                                        \
  template void moe_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const MoeOffsets&,             \
                                const ModelConfig&, int, int, const MoeSaved<T>&, MoeScratch<T>&, ExpertCompute<T>&,  \
                                double, GradMode);
ZAYA_INST(float)
ZAYA_INST(double)

}  // namespace zaya
