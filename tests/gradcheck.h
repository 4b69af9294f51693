// One harness for every finite-difference gradient check (as ggml's test-backend-ops):
// an op is a row of named inputs, a forward producing outputs, and a backward that
// accumulates input gradients from an output gradient. The check draws random inputs
// and a random output weighting w, and compares d(sum w*out)/d(input) with central
// differences in double precision.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

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
};

struct GradResult {
  double max_rel_err = 0;
  std::string worst;
};

inline GradResult check_op(const OpCase& op, uint64_t seed = 1, double eps = 1e-6) {
  Philox rng(seed, hash_name(op.name));
  std::vector<std::vector<double>> in(op.input_sizes.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].resize(op.input_sizes[i]);
    for (auto& v : in[i]) v = rng.normal();
    if (op.init) op.init(int(i), in[i]);
  }
  std::vector<double> out;
  op.forward(in, out);
  std::vector<double> w(out.size());
  for (auto& v : w) v = rng.normal();
  auto objective = [&]() {
    std::vector<double> o;
    op.forward(in, o);
    double s = 0;
    for (size_t k = 0; k < o.size(); ++k) s += w[k] * o[k];
    return s;
  };
  std::vector<std::vector<double>> din(in.size());
  for (size_t i = 0; i < in.size(); ++i) din[i].assign(in[i].size(), 0.0);
  op.backward(in, w, din);
  GradResult r;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t j = 0; j < in[i].size(); ++j) {
      const double x0 = in[i][j];
      in[i][j] = x0 + eps;
      const double fp = objective();
      in[i][j] = x0 - eps;
      const double fm = objective();
      in[i][j] = x0;
      const double fd = (fp - fm) / (2 * eps);
      const double err = std::fabs(fd - din[i][j]) / std::max(1.0, std::fabs(fd));
      if (err > r.max_rel_err) {
        r.max_rel_err = err;
        r.worst = op.name + " input " + std::to_string(i) + "[" + std::to_string(j) + "] fd=" + std::to_string(fd) +
                  " analytic=" + std::to_string(din[i][j]);
      }
    }
  return r;
}

}  // namespace zaya::test
