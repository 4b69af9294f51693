#include "kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/bf16.h"

#include "kernels/vec_math.h"

namespace zaya {

namespace {
// One row's log-sum-exp (into *lse) and log p(target) (0 for an ignored row).
template <class T>
double row_loss(const T* z, int V, int32_t t, T* lse) {
  T m, s;  // exp in the working precision; 32 partial sums keep fp32 accurate for V <= 1e6
  if constexpr (std::is_same_v<T, float>) {
    m = row_max(z, V);
    s = row_sum_exp(z, V, m);
  } else {
    m = z[0];
    for (int v = 1; v < V; ++v) m = std::max(m, z[v]);
    s = 0;
    for (int v = 0; v < V; ++v) s += std::exp(z[v] - m);
  }
  const double l = double(m) + std::log(double(s));
  *lse = T(l);
  return t == kIgnoreIndex ? 0.0 : double(z[t]) - l;
}
}  // namespace

template <class T>
double cross_entropy_forward(T* lse, T* logprob, const T* logits, const int32_t* targets, int N, int V, int* count) {
  double total = 0;
  int n = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, n)
  for (int i = 0; i < N; ++i) {
    const double lp = row_loss(logits + size_t(i) * V, V, targets[i], &lse[i]);
    if (targets[i] != kIgnoreIndex) total -= lp, ++n;
    if (logprob) logprob[i] = T(lp);
  }
  *count = n;
  return total;
}

double cross_entropy_forward_bf16(float* lse, const bf16* logits, const int32_t* targets, int N, int V, int* count) {
  double total = 0;
  int n = 0;
#pragma omp parallel reduction(+ : total, n)
  {
    std::vector<float> row(static_cast<size_t>(V));  // this thread's widened row
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      convert_from_bf16(logits + size_t(i) * V, row.data(), size_t(V));
      const double lp = row_loss(row.data(), V, targets[i], &lse[i]);
      if (targets[i] != kIgnoreIndex) total -= lp, ++n;
    }
  }
  *count = n;
  return total;
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, int N, int V,
                            T scale) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* z = logits + size_t(i) * V;
    T* dz = dlogits + size_t(i) * V;
    const int32_t t = targets[i];
    if (t == kIgnoreIndex) {
      std::fill(dz, dz + V, T(0));
      continue;
    }
    const T l = lse[i];
    if constexpr (std::is_same_v<T, float>)
      row_exp_scale(dz, z, V, l, scale);
    else
      for (int v = 0; v < V; ++v) dz[v] = std::exp(z[v] - l) * scale;
    dz[t] -= scale;
  }
}

void cross_entropy_backward_bf16(bf16* logits, const float* lse, const int32_t* targets, int N, int V, float scale) {
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(V));  // this thread's fp32 row: logits, then gradient
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      bf16* z = logits + size_t(i) * V;
      const int32_t t = targets[i];
      if (t == kIgnoreIndex) {
        std::fill(row.begin(), row.end(), 0.f);
      } else {
        convert_from_bf16(z, row.data(), size_t(V));
        row_exp_scale(row.data(), row.data(), V, lse[i], scale);
        row[size_t(t)] -= scale;
      }
      convert_to_bf16(row.data(), z, size_t(V));
    }
  }
}

template double cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int, int, int*);
template double cross_entropy_forward<double>(double*, double*, const double*, const int32_t*, int, int, int*);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int, int, float);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int, int,
                                             double);

}  // namespace zaya
