// What bench_attention_fp32 and bench_gemm_bf16 --attention share: one layer's training
// attention on random operands (head dim 64), timed forward and backward for several variants of
// the same call (a kernel tier, a precision), their calls interleaved.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace zaya::attn_bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Medians {
  double forward, backward;  // seconds
};

struct Layer {
  static constexpr int hd = 64;
  AttnShape s;
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv, scratch;

  Layer(int B, int T, int Hq, int Hk) : s{B, T, T, 0, Hq, Hk, hd, Hq * hd, Hk * hd, Hk * hd, Hq * hd} {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    auto randv = [&](size_t n) {
      std::vector<float> x(n);
      for (auto& e : x) e = nd(rng);
      return x;
    };
    q = randv(size_t(B) * T * s.ldq), k = randv(size_t(B) * T * s.ldk), v = randv(k.size()), dout = randv(q.size());
    out.resize(q.size()), lse.resize(size_t(B) * Hq * T), dq.resize(q.size()), dk.resize(k.size()), dv.resize(k.size());
    scratch.resize(s.scratch_elems(omp_get_max_threads()));
  }

  // N variants, each selected by set(i) before its calls: reps calls of each after 2 warm-up
  // calls, interleaved (variant 0, 1, ..., 0, 1, ...); the median forward and backward times.
  template <int N, class Set>
  std::array<Medians, N> time(int reps, Set&& set) {
    std::vector<double> tf[N], tb[N];
    for (int r = 0; r < reps + 2; ++r)
      for (int p = 0; p < N; ++p) {
        set(p);
        const double t0 = now();
        attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s, scratch.data());
        const double t1 = now();
        attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(), k.data(),
                           v.data(), s, scratch.data());
        const double t2 = now();
        if (r >= 2) tf[p].push_back(t1 - t0), tb[p].push_back(t2 - t1);
      }
    std::array<Medians, N> m;
    for (int p = 0; p < N; ++p) m[size_t(p)] = {median(tf[p]), median(tb[p])};
    return m;
  }
};

}  // namespace zaya::attn_bench
