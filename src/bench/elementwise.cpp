#include "bench/elementwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/interleaved.h"
#include "kernels/norm.h"
#include "kernels/vec_math.h"
#include "model/params.h"
#include "train/optim.h"

namespace zaya::bench {

ElementwiseMeasurement measure_elementwise(double seconds_per_kind) {
  const size_t rows = 256, cols = 8192, n = rows * cols;  // a [rows, cols] block, like logits
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) x[i] = -8.0f * float(i % 1021) / 1021.0f;
  std::vector<double> sums(rows);
  ElementwiseMeasurement r;
  r.threads = omp_get_max_threads();
  // Every quantity is one item of measure_interleaved: rounds that visit each in turn, the
  // median per item, disagreeing items measured again (a burst of other load lands on one round
  // of each; the best of passes kept whichever pass a timer glitch or a cache accident made
  // shortest, and rates between runs differed 10x).
  std::vector<TimedItem> items;
  // Cross-entropy / softmax: a float exp per element, summed per row, by the loss's own
  // vectorised row_sum_exp (std::exp in a loop runs several times slower).
  items.push_back({"exp", [&] {
#pragma omp parallel for schedule(static)
                     for (size_t i = 0; i < rows; ++i) sums[i] = row_sum_exp(&x[i * cols], int(cols), 0.5f);
                   }, 0});
  // GELU: a float erf per element, by the router's own vectorised gelu_row (std::erf in a loop
  // runs an order of magnitude slower).
  items.push_back({"erf", [&] {
#pragma omp parallel for schedule(static)
                     for (size_t i = 0; i < rows; ++i) gelu_row(&y[i * cols], &x[i * cols], int(cols));
                   }, 0});
  // One parallel loop over a few elements per thread: what a small kernel pays to fork and join.
  const int regions = 200;
  items.push_back({"parallel_region", [&] {
                     for (int i = 0; i < regions; ++i) {
#pragma omp parallel for schedule(static)
                       for (int t = 0; t < 64; ++t) y[size_t(t)] = x[size_t(t)] + float(i);
                     }
                   }, 0});
  // zaya's residual merge + RMSNorm, forward and backward, on [4096, 256] fp32 (the step
  // model's bytes for them: forward N*D*(4 + 3*4 + 4 + 4), backward twice that).
  const int N = 4096, D = 256;
  const size_t nd = size_t(N) * D, n_rows = size_t(N), width = size_t(D);
  std::vector<float> h(nd, 0.5f), res(nd, 0.25f), out(nd), xn(nd), rstd(n_rows), dout(nd, 1e-3f), dx(nd), dh(nd),
      dres(nd), w(width, 1.0f), b(width, 0.0f), dw(width), d1(width), d2(width), d3(width), d4(width);
  const double norm_bytes = 3.0 * double(nd) * (4 + 3 * 4 + 4 + 4);
  items.push_back({"merge+norm", [&] {
                     res_merge_forward(out.data(), h.data(), res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
                     rmsnorm_forward(xn.data(), rstd.data(), out.data(), w.data(), N, D, 1e-5);
                     rmsnorm_backward(dx.data(), dw.data(), dout.data(), out.data(), w.data(), rstd.data(), N, D);
                     res_merge_backward(dh.data(), dres.data(), d1.data(), d2.data(), d3.data(), d4.data(), dx.data(),
                                        h.data(), res.data(), w.data(), b.data(), w.data(), b.data(), N, D);
                   }, 0});
  // The trainer's AdamW over 8M parameters held as tensors of one size: parameters, gradients
  // and moments of 128 MB, beyond the last-level cache, so the state streams from memory as in
  // a training step, whose other work has evicted it (a set that fits in cache updates several
  // times faster). Parameters and gradients are shared; each size has its own moments.
  const std::vector<double> sizes = {1024.0, 4096.0, 16384.0, 32768.0, 131072.0, 1048576.0, 4194304.0};
  const size_t total = size_t(8) << 20;
  std::vector<float> p(total, 0.01f), g(total, 1e-3f);
  std::vector<std::unique_ptr<ParamTable>> tables;
  std::vector<std::unique_ptr<Optimizer>> opts;
  for (double size : sizes) {
    tables.push_back(std::make_unique<ParamTable>());
    for (size_t i = 0; i < total / size_t(size); ++i)
      tables.back()->add("w" + std::to_string(i), {int64_t(size)}, ParamRole::Matrix, 0);
    opts.push_back(std::make_unique<Optimizer>(*tables.back(), OptimizerSettings{}));
    Optimizer* o = opts.back().get();
    items.push_back({"adamw " + std::to_string(int64_t(size)), [o, &p, &g] { o->step(p.data(), g.data(), 1e-4); }, 0});
  }
  InterleavedOptions o;
  o.rounds = 7;
  o.round_seconds = std::max(seconds_per_kind / o.rounds, 0.005);
  const std::vector<ItemTiming> t = measure_interleaved(std::move(items), o);
  r.exp_f32_per_s = double(n) / t[0].seconds;
  r.erf_f32_per_s = double(n) / t[1].seconds;
  r.parallel_region_us = t[2].seconds / regions * 1e6;
  r.kernels_GBps = norm_bytes / t[3].seconds / 1e9;
  for (size_t i = 0; i < sizes.size(); ++i) r.adamw_rates.push_back({sizes[i], double(total) / t[4 + i].seconds});
  for (const ItemTiming& it : t)
    if (it.flagged) r.flagged.push_back(it.name);
  volatile double sink = sums[0] + y[n - 1];
  (void)sink;
  return r;
}

}  // namespace zaya::bench
