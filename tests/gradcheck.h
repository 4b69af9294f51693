// One harness for every finite-difference gradient check (as ggml's test-backend-ops):
// an op is a row of named inputs, a forward producing outputs, and a backward that
// accumulates input gradients from an output gradient. The check draws random inputs
// and a random output weighting w, and compares d(sum w*out)/d(input) with finite
// differences of the objective, evaluated in double (rows that run a float path convert
// inside their forward and backward).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "core/rng.h"

namespace zaya::test {

struct OpCase {
  std::string name;
  std::vector<size_t> input_sizes;
  // Optional per-input generator (e.g. strictly positive scales); default N(0, 1).
  std::function<void(int input, std::vector<double>&)> init;
  std::function<void(const std::vector<std::vector<double>>& in, std::vector<double>& out)> forward;
  std::function<void(const std::vector<std::vector<double>>& in, const std::vector<double>& dout,
                     std::vector<std::vector<double>>& din)>
      backward;
  // Ops with discontinuities (routing): how far the inputs sit from the nearest one (a
  // negative value rejects a draw, e.g. one that leaves a path unexercised). Draws are
  // repeated with the next seed until margin >= min_margin; every perturbed input's margin
  // is reported so the test can assert no finite difference straddled a discontinuity.
  std::function<double(const std::vector<std::vector<double>>& in)> margin = nullptr;
  double min_margin = 0;
  // Finite-difference step and bound on the error (see check_op); double rows keep the
  // defaults, float rows set their own.
  double eps = 1e-6, tol = 1e-6;
  bool four_point = false;  // O(h^4) stencil: a float row can take a larger step
};

struct GradResult {
  double max_rel_err = 0;
  std::string worst;
  uint64_t seed = 0;                                             // the draw checked
  double min_margin = std::numeric_limits<double>::infinity();  // over every perturbed forward
  size_t checked = 0;                                            // entries compared
};

// The finite differences run thousands of tiny forwards: one thread each, since OpenMP
// barriers on a loaded 2-core machine cost 100x the work. The analytic backward (and the
// forward it saves from) keeps the caller's thread count.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;
};

inline std::vector<std::vector<double>> draw_inputs(const OpCase& op, uint64_t seed) {
  Philox rng(seed, hash_name(op.name));
  std::vector<std::vector<double>> in(op.input_sizes.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].resize(op.input_sizes[i]);
    for (auto& v : in[i]) v = rng.normal();
    if (op.init) op.init(int(i), in[i]);
  }
  return in;
}

// Every entry of every input. The error of an entry is |fd - analytic| / max(|fd|, 1):
// relative for gradients above 1, absolute below (the rows draw O(1) inputs, so their
// gradients are O(1) and finite-difference noise is absolute).
inline GradResult check_op(const OpCase& op, uint64_t seed = 1) {
  GradResult r;
  std::vector<std::vector<double>> in;
  {
    OneThread one;
    for (r.seed = seed; r.seed < seed + 5000; ++r.seed) {
      in = draw_inputs(op, r.seed);
      if (!op.margin || op.margin(in) >= op.min_margin) break;
    }
    if (op.margin) r.min_margin = op.margin(in);
  }
  std::vector<double> out;
  op.forward(in, out);
  Philox rng(r.seed, hash_name(op.name) + 1);
  std::vector<double> w(out.size());
  for (auto& v : w) v = rng.normal();
  auto objective = [&]() {
    std::vector<double> o;
    op.forward(in, o);
    double s = 0;
    for (size_t k = 0; k < o.size(); ++k) s += w[k] * o[k];
    if (op.margin) r.min_margin = std::min(r.min_margin, op.margin(in));
    return s;
  };
  std::vector<std::vector<double>> din(in.size());
  for (size_t i = 0; i < in.size(); ++i) din[i].assign(in[i].size(), 0.0);
  op.backward(in, w, din);
  OneThread one;
  const double h = op.eps;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t j = 0; j < in[i].size(); ++j) {
      const double x0 = in[i][j];
      auto at = [&](double dx) {
        in[i][j] = x0 + dx;
        return objective();
      };
      double fd;
      if (op.four_point)
        fd = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
      else
        fd = (at(h) - at(-h)) / (2 * h);
      in[i][j] = x0;
      double err = std::fabs(fd - din[i][j]) / std::max(1.0, std::fabs(fd));
      if (!std::isfinite(err)) err = std::numeric_limits<double>::infinity();  // fails, where > would pass a NaN
      ++r.checked;
      if (err > r.max_rel_err) {
        r.max_rel_err = err;
        char buf[160];
        std::snprintf(buf, sizeof buf, " input %zu[%zu] fd=%.9g analytic=%.9g", i, j, fd, din[i][j]);
        r.worst = op.name + buf;
      }
    }
  return r;
}

}  // namespace zaya::test
