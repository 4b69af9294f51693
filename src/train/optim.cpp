#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/gemm.h"

namespace zaya {

const char* optimizer_kind_name(OptimizerKind k) {
  for (const auto& [name, kind] : kOptimizerKinds)
    if (kind == k) return name;
  return "?";
}

const std::vector<std::string>& optimizer_kind_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, kind] : kOptimizerKinds) v.push_back(name);
    return v;
  }();
  return names;
}

OptimizerKind parse_optimizer_kind(const std::string& name, const std::string& where) {
  for (const auto& [n, kind] : kOptimizerKinds)
    if (name == n) return kind;
  fail(where, " must be adamw or muon, got '", name, "'");
}

void newton_schulz5(float* X, int rows, int cols, int steps, std::vector<float>& scratch) {
  const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const bool tall = rows > cols;
  const int r = tall ? cols : rows, n = tall ? rows : cols;  // work on the wide r x n form
  const size_t rn = size_t(r) * n, rr = size_t(r) * r;
  scratch.resize(2 * rn + 2 * rr);
  float* W = scratch.data();  // r x n
  float* Y = W + rn;          // r x n
  float* A = Y + rn;          // r x r
  float* B = A + rr;          // r x r
  if (tall) {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) W[size_t(j) * n + i] = X[size_t(i) * cols + j];
  } else {
    std::copy(X, X + rn, W);
  }
  double ss = 0;
  for (size_t i = 0; i < rn; ++i) ss += double(W[i]) * W[i];
  const float inv = float(1.0 / (std::sqrt(ss) + 1e-7));
  for (size_t i = 0; i < rn; ++i) W[i] *= inv;
  // Always fp32 (whatever the model's GEMM precision): the iteration is sensitive to rounding.
  const auto eng = GemmEngine::OpenBLAS;
  const auto f32 = GemmPrecision::F32;
  for (int it = 0; it < steps; ++it) {
    gemm_with(eng, f32, Trans::N, Trans::T, r, r, n, 1.f, W, n, W, n, 0.f, A, r);  // A = W W^T
    std::copy(A, A + rr, B);
    gemm_with(eng, f32, Trans::N, Trans::N, r, r, r, c, A, r, A, r, b, B, r);  // B = b A + c A A
    std::copy(W, W + rn, Y);
    gemm_with(eng, f32, Trans::N, Trans::N, r, n, r, 1.f, B, r, W, n, a, Y, n);  // Y = a W + B W
    std::swap(W, Y);
  }
  if (tall) {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) X[size_t(i) * cols + j] = W[size_t(j) * n + i];
  } else {
    std::copy(W, W + rn, X);
  }
}

Optimizer::Optimizer(const ParamTable& table, const OptimizerSettings& s, FlatRange owned)
    : table_(table), s_(s), owned_(owned) {
  ZAYA_CHECK(owned.begin <= owned.end && owned.end <= table.total, "optimizer: owned range [", owned.begin, ", ",
             owned.end, ") outside the ", table.total, " parameters");
  ZAYA_CHECK(s.adamw.beta1 >= 0 && s.adamw.beta1 < 1 && s.adamw.beta2 >= 0 && s.adamw.beta2 < 1,
             "optimizer: betas must be in [0, 1)");
  ZAYA_CHECK(s.muon.ns_steps >= 1, "optimizer: muon.ns_steps must be >= 1");
  size_t biggest = 0;
  for (const ParamInfo& p : table.params) {
    if (!uses_muon(p) || p.offset + p.numel <= owned.begin || p.offset >= owned.end) continue;
    ZAYA_CHECK(p.offset >= owned.begin && p.offset + p.numel <= owned.end, "optimizer: Muon tensor ", p.name,
               " is cut by the owned range [", owned.begin, ", ", owned.end, "): Muon needs whole matrices");
    ZAYA_CHECK(p.shape.size() == 2, "optimizer: Muon tensor ", p.name, " is not 2-D");
    biggest = std::max(biggest, p.numel);
  }
  m_.assign(owned.size(), 0.f);
  v_.assign(owned.size(), 0.f);
  upd_.reserve(biggest);
}

bool Optimizer::uses_muon(const ParamInfo& p) const { return s_.kind == OptimizerKind::Muon && p.muon(); }

bool Optimizer::decays(const ParamInfo& p) const {
  return p.decay() || (s_.decay_embeddings && p.role == ParamRole::Embedding);
}

// torch.optim.AdamW's arithmetic, in fp32, in its order. A plain function over restrict
// pointers and by-value scalars: inside a capturing lambda the outlined OpenMP body read
// every operand through the closure and GCC left the loop scalar (3.5x slower than the
// memory traffic allows).
template <bool kWrite16>
static void adamw_kernel(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                         bf16* __restrict p16, size_t n, float keep, float b1, float b2, float step_size,
                         float bc2_sqrt, float eps, float gsf) {
  const float one_b1 = 1.f - b1, one_b2 = 1.f - b2;
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * gsf;
    float pi = p[i] * keep;
    const float mi = m[i] + one_b1 * (gi - m[i]);
    const float vi = v[i] * b2 + one_b2 * gi * gi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    pi -= step_size * (mi / denom);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kWrite16) p16[i] = to_bf16(pi);
  }
}

void Optimizer::adamw_span(float* p, const float* g, float* m, float* v, size_t n, double lr, double wd,
                           double gs, bf16* p16) const {
  const float b1 = float(s_.adamw.beta1), b2 = float(s_.adamw.beta2);
  const double bc1 = 1 - std::pow(s_.adamw.beta1, double(t_)), bc2 = 1 - std::pow(s_.adamw.beta2, double(t_));
  const float step_size = float(lr / bc1), bc2_sqrt = float(std::sqrt(bc2)), eps = float(s_.adamw.eps);
  const float keep = float(1 - lr * wd), gsf = float(gs);
  if (p16)
    adamw_kernel<true>(p, g, m, v, p16, n, keep, b1, b2, step_size, bc2_sqrt, eps, gsf);
  else
    adamw_kernel<false>(p, g, m, v, nullptr, n, keep, b1, b2, step_size, bc2_sqrt, eps, gsf);
}

// Moonlight's Muon: buf = mu buf + g; u = g + mu buf (Nesterov) or buf; u = NS5(u);
// p *= 1 - lr wd; p -= lr * rms_scale * sqrt(max(m, n)) * u.
void Optimizer::muon_tensor(const ParamInfo& info, float* p, const float* g, float* m, double lr, double wd,
                            double gs, bf16* p16) {
  const int rows = int(info.shape[0]), cols = int(info.shape[1]);
  const size_t n = info.numel;
  const float mu = float(s_.muon.momentum), gsf = float(gs);
  upd_.resize(n);
  float* u = upd_.data();
  const bool nesterov = s_.muon.nesterov;
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * gsf;
    m[i] = mu * m[i] + gi;
    u[i] = nesterov ? gi + mu * m[i] : m[i];
  }
  newton_schulz5(u, rows, cols, s_.muon.ns_steps, ns_scratch_);
  const float keep = float(1 - lr * wd);
  const float scale = float(lr * s_.muon.rms_scale * std::sqrt(double(std::max(rows, cols))));
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) {
    p[i] *= keep;
    p[i] -= scale * u[i];
  }
  if (p16) convert_to_bf16(p, p16, n);
}

void Optimizer::step(float* params, const float* grads, double lr, double grad_scale, bf16* params_bf16) {
  ++t_;
  const double wd = s_.adamw.weight_decay;
  for (const ParamInfo& info : table_.params) {
    const size_t b = std::max(info.offset, owned_.begin), e = std::min(info.offset + info.numel, owned_.end);
    if (b >= e) continue;
    const size_t k = b - owned_.begin;
    const double twd = decays(info) ? wd : 0.0;
    if (uses_muon(info))
      muon_tensor(info, params + b, grads + b, m_.data() + k, lr, twd, grad_scale,
                  params_bf16 ? params_bf16 + b : nullptr);
    else
      adamw_span(params + b, grads + b, m_.data() + k, v_.data() + k, e - b, lr, twd, grad_scale,
                 params_bf16 ? params_bf16 + b : nullptr);
  }
}

nlohmann::json Optimizer::state() const {
  return {{"kind", optimizer_kind_name(s_.kind)},
          {"step", t_},
          {"owned", {owned_.begin, owned_.end}},
          {"adamw",
           {{"beta1", s_.adamw.beta1},
            {"beta2", s_.adamw.beta2},
            {"eps", s_.adamw.eps},
            {"weight_decay", s_.adamw.weight_decay}}},
          {"muon",
           {{"momentum", s_.muon.momentum},
            {"nesterov", s_.muon.nesterov},
            {"ns_steps", s_.muon.ns_steps},
            {"rms_scale", s_.muon.rms_scale}}},
          {"decay_embeddings", s_.decay_embeddings}};
}

void Optimizer::load_state(const nlohmann::json& j) {
  ZAYA_CHECK(j.is_object() && j.contains("kind") && j.contains("step"), "optimizer state: missing field kind/step");
  std::string kind = j["kind"].get<std::string>();
  ZAYA_CHECK(kind == optimizer_kind_name(s_.kind), "optimizer state: the checkpoint was written by ", kind,
             " but the run config asks for ", optimizer_kind_name(s_.kind));
  t_ = j["step"].get<int64_t>();
  ZAYA_CHECK(t_ >= 0, "optimizer state: field step must be >= 0");
}

}  // namespace zaya
