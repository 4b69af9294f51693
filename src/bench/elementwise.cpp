#include "bench/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/norm.h"
#include "kernels/vec_math.h"
#include "model/params.h"
#include "train/optim.h"

namespace zaya::bench {

namespace {

// Best rate over repeated passes of `body` over n elements until `seconds` have elapsed.
template <class F>
double best_rate(size_t n, double seconds, F&& body) {
  using clock = std::chrono::steady_clock;
  double best = 0;
  auto start = clock::now();
  int passes = 0;
  do {
    auto t0 = clock::now();
    body();
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    if (passes > 0) best = std::max(best, double(n) / dt);  // the first pass warms up
    ++passes;
  } while (passes < 3 || std::chrono::duration<double>(clock::now() - start).count() < seconds);
  return best;
}

}  // namespace

ElementwiseMeasurement measure_elementwise(double seconds_per_kind) {
  const size_t rows = 256, cols = 8192, n = rows * cols;  // a [rows, cols] block, like logits
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = -8.0f * float(i % 1021) / 1021.0f;
  std::vector<double> sums(rows);
  ElementwiseMeasurement r;
  r.threads = omp_get_max_threads();
  // Cross-entropy / softmax: a float exp per element, summed per row, by the loss's own
  // vectorised row_sum_exp (std::exp in a loop runs several times slower).
  r.exp_f32_per_s = best_rate(n, seconds_per_kind, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; ++i) sums[i] = row_sum_exp(&x[i * cols], int(cols), 0.5f);
  });
  // GELU: a float erf per element.
  r.erf_f32_per_s = best_rate(n, seconds_per_kind, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; ++i)
      for (size_t v = 0; v < cols; ++v) y[i * cols + v] = std::erf(x[i * cols + v] * 0.70710678f);
  });
  // One parallel loop over a few elements per thread: what a small kernel pays to fork and join.
  {
    using clock = std::chrono::steady_clock;
    const int reps = 2000;
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      auto t0 = clock::now();
      for (int i = 0; i < reps; ++i) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < 64; ++t) y[size_t(t)] = x[size_t(t)] + float(i);
      }
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / reps);
    }
    r.parallel_region_us = best * 1e6;
  }
  // zaya's residual merge + RMSNorm, forward and backward, on [4096, 256] fp32 (the step
  // model's bytes for them: forward N*D*(4 + 3*4 + 4 + 4), backward twice that).
  {
    const int N = 4096, D = 256;
    const size_t nd = size_t(N) * D;
    const size_t n_rows = size_t(N), width = size_t(D);
    std::vector<float> h(nd, 0.5f), res(nd, 0.25f), out(nd), xn(nd), rstd(n_rows), dout(nd, 1e-3f), dx(nd), dh(nd),
        dres(nd), w(width, 1.0f), b(width, 0.0f), dw(width), d1(width), d2(width), d3(width), d4(width);
    const double bytes = 3.0 * double(nd) * (4 + 3 * 4 + 4 + 4);
    const double per_s = best_rate(1, seconds_per_kind, [&] {
      res_merge_forward(out.data(), h.data(), res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
      rmsnorm_forward(xn.data(), rstd.data(), out.data(), w.data(), N, D, 1e-5);
      rmsnorm_backward(dx.data(), dw.data(), dout.data(), out.data(), w.data(), rstd.data(), N, D);
      res_merge_backward(dh.data(), dres.data(), d1.data(), d2.data(), d3.data(), d4.data(), dx.data(), h.data(),
                         res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
    });
    r.kernels_GBps = bytes * per_s / 1e9;
  }
  // The trainer's AdamW over 8M parameters held as tensors of one size (a model's worth, so
  // the state streams from memory as in training rather than sitting in cache).
  for (double size : {1024.0, 4096.0, 16384.0, 32768.0, 131072.0, 1048576.0, 4194304.0}) {
    const size_t count = size_t(8388608 / size);
    ParamTable table;
    for (size_t i = 0; i < count; ++i) table.add("w" + std::to_string(i), {int64_t(size)}, ParamRole::Matrix, 0);
    Optimizer opt(table, OptimizerSettings{});
    std::vector<float> p(table.total, 0.01f), g(table.total, 1e-3f);
    r.adamw_rates.push_back(
        {size, best_rate(table.total, seconds_per_kind / 2, [&] { opt.step(p.data(), g.data(), 1e-4); })});
  }
  volatile double sink = sums[0] + y[n - 1];
  (void)sink;
  return r;
}

}  // namespace zaya::bench
