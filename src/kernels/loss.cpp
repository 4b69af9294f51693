#include "kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/bf16.h"

#include "kernels/vec_math.h"

namespace zaya {

template <class T>
double cross_entropy_forward(T* lse, T* logprob, const T* logits, const int32_t* targets, int N, int V, int* count) {
  double total = 0;
  int n = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, n)
  for (int i = 0; i < N; ++i) {
    const T* z = logits + size_t(i) * V;
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
    lse[i] = T(l);
    const int32_t t = targets[i];
    double lp = 0;
    if (t != kIgnoreIndex) {
      lp = double(z[t]) - l;
      total -= lp;
      ++n;
    }
    if (logprob) logprob[i] = T(lp);
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

void cross_entropy_backward_bf16_inplace(float* logits, const float* lse, const int32_t* targets, int N, int V,
                                         float scale) {
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(V));  // this thread's fp32 gradient row
#pragma omp for schedule(static)
    for (int i = 0; i < N; ++i) {
      float* z = logits + size_t(i) * V;
      const int32_t t = targets[i];
      if (t == kIgnoreIndex) {
        std::fill(row.begin(), row.end(), 0.f);
      } else {
        row_exp_scale(row.data(), z, V, lse[i], scale);
        row[size_t(t)] -= scale;
      }
      bf16* d = reinterpret_cast<bf16*>(z);  // over the row's first half
      for (int v = 0; v < V; ++v) d[v] = to_bf16(row[size_t(v)]);
    }
  }
}

template double cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int, int, int*);
template double cross_entropy_forward<double>(double*, double*, const double*, const int32_t*, int, int, int*);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int, int, float);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int, int,
                                             double);

}  // namespace zaya
