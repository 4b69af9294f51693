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

// torch.optim.AdamW's arithmetic on one weight, in fp32, in its order. Every kernel below
// inlines this one function, so the plain and the split master weights update alike, bit
// for bit.
struct AdamWRule {
  float keep, b1, b2, step_size, bc2_sqrt, eps, gsf;
  inline float operator()(float p, float g, float& m, float& v) const {
    const float gi = g * gsf;
    float pi = p * keep;
    const float mi = m + (1.f - b1) * (gi - m);
    const float vi = v * b2 + (1.f - b2) * gi * gi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    pi -= step_size * (mi / denom);
    m = mi;
    v = vi;
    return pi;
  }
};

// A plain function over restrict pointers and a by-value rule: inside a capturing lambda the
// outlined OpenMP body read every operand through the closure and GCC left the loop scalar
// (3.5x slower than the memory traffic allows).
template <bool kWrite16>
static void adamw_kernel(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                         bf16* __restrict p16, size_t n, AdamWRule rule) {
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) {
    const float pi = rule(p[i], g[i], m[i], v[i]);
    p[i] = pi;
    if constexpr (kWrite16) p16[i] = to_bf16_weight(pi);
  }
}

// Elements [from, to) of a tensor stored split in rows of K (model/split_master.h), at w; g
// indexed from the tensor's start, m and v from `from`.
static void adamw_split_kernel(float* w, int K, size_t from, size_t to, const float* __restrict g,
                               float* __restrict m, float* __restrict v, AdamWRule rule) {
  const size_t k = size_t(K), r0 = from / k, r1 = (to + k - 1) / k;
  uint16_t* h = reinterpret_cast<uint16_t*>(w);
#pragma omp parallel for schedule(static) if (to - from > 16384)
  for (size_t r = r0; r < r1; ++r) {
    const AdamWRule rl = rule;  // a local copy: no store below can alias it
    const size_t c0 = std::max(from, r * k) - r * k, c1 = std::min(to, r * k + k) - r * k;
    uint16_t* __restrict hi = h + 2 * k * r;
    uint16_t* __restrict lo = hi + k;
    const size_t e = r * k - from;  // element r*K + c is state index e + c
    // The next row (4K bytes) ahead: the hardware prefetchers do not follow two streams interleaved
    // a row apart across pages.
    for (size_t c = c0; c < c1; c += 16) __builtin_prefetch(hi + 2 * k + 2 * c, 1);
#pragma omp simd
    for (size_t c = c0; c < c1; ++c)
      split_store(rl(split_value(hi[c], lo[c]), g[r * k + c], m[e + c], v[e + c]), hi[c], lo[c]);
  }
}

AdamWRule Optimizer::adamw_rule(double lr, double wd, double gs) const {
  const double bc1 = 1 - std::pow(s_.adamw.beta1, double(t_)), bc2 = 1 - std::pow(s_.adamw.beta2, double(t_));
  return {float(1 - lr * wd), float(s_.adamw.beta1), float(s_.adamw.beta2), float(lr / bc1),
          float(std::sqrt(bc2)), float(s_.adamw.eps), float(gs)};
}

// Muon's update of one weight: p *= 1 - lr wd; p -= scale * u, the second step one fused
// multiply-add, written out: left to contraction, GCC fused the other product in one of the
// two loops.
static inline float muon_apply(float p, float u, float keep, float scale) { return std::fma(-scale, u, p * keep); }

// Moonlight's Muon: buf = mu buf + g; u = g + mu buf (Nesterov) or buf; u = NS5(u);
// p *= 1 - lr wd; p -= lr * rms_scale * sqrt(max(m, n)) * u. split_row > 0: p stored split.
void Optimizer::muon_tensor(const ParamInfo& info, float* p, const float* g, float* m, double lr, double wd,
                            double gs, bf16* p16, int split_row) {
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
  if (split_row) {
    const size_t k = size_t(split_row), nr = n / k;
    uint16_t* h = reinterpret_cast<uint16_t*>(p);
#pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t r = 0; r < nr; ++r) {
      uint16_t* __restrict hi = h + 2 * k * r;
      uint16_t* __restrict lo = hi + k;
      const float* __restrict ur = u + r * k;
#pragma omp simd
      for (size_t c = 0; c < k; ++c) split_store(muon_apply(split_value(hi[c], lo[c]), ur[c], keep, scale), hi[c], lo[c]);
    }
    return;
  }
#pragma omp parallel for simd schedule(static) if (n > 16384)
  for (size_t i = 0; i < n; ++i) p[i] = muon_apply(p[i], u[i], keep, scale);
  if (p16) convert_to_bf16_weights(p, p16, n);
}

void Optimizer::step(float* params, const float* grads, double lr, double grad_scale, bf16* params_bf16,
                     const SplitMaster* split) {
  ++t_;
  const double wd = s_.adamw.weight_decay;
  for (const ParamInfo& info : table_.params) {
    const size_t b = std::max(info.offset, owned_.begin), e = std::min(info.offset + info.numel, owned_.end);
    if (b >= e) continue;
    const size_t k = b - owned_.begin;
    const double twd = decays(info) ? wd : 0.0;
    const double plr = info.name.find(".router.") != std::string::npos ? lr * s_.router_lr_scale : lr;
    const int row = split ? SplitMaster::row_of(info) : 0;
    bf16* p16 = params_bf16 && !row ? params_bf16 + b : nullptr;
    if (uses_muon(info)) {
      muon_tensor(info, params + b, grads + b, m_.data() + k, plr, twd, grad_scale, p16, row);
    } else {
      const AdamWRule rule = adamw_rule(plr, twd, grad_scale);
      if (row)
        adamw_split_kernel(params + info.offset, row, b - info.offset, e - info.offset, grads + info.offset,
                           m_.data() + k, v_.data() + k, rule);
      else if (p16)
        adamw_kernel<true>(params + b, grads + b, m_.data() + k, v_.data() + k, p16, e - b, rule);
      else
        adamw_kernel<false>(params + b, grads + b, m_.data() + k, v_.data() + k, nullptr, e - b, rule);
    }
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
          {"decay_embeddings", s_.decay_embeddings},
          {"router_lr_scale", s_.router_lr_scale}};
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
