#include "kernels/gemm.h"

#include <cpuid.h>
#include <strings.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/timer.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_avx512.h"

namespace zaya {

GemmSettings& gemm_settings() {
  static GemmSettings s;
  return s;
}

const CpuFeatures& cpu_features() {
  static CpuFeatures f = [] {
    CpuFeatures c;
    unsigned a, b, cc, d;
    if (__get_cpuid_count(7, 0, &a, &b, &cc, &d)) {
      c.avx2 = b & (1u << 5);
      c.avx512f = b & (1u << 16);
      c.amx_bf16 = d & (1u << 22);
    }
    if (__get_cpuid_count(7, 1, &a, &b, &cc, &d)) c.avx512_bf16 = a & (1u << 5);
    if (__get_cpuid(1, &a, &b, &cc, &d)) c.fma = cc & (1u << 12);
    return c;
  }();
  return f;
}

bool bf16_gemm_supported() { return cpu_features().avx512_bf16 || cpu_features().amx_bf16; }

const char* gemm_engine_name(GemmEngine e) {
  switch (e) {
    case GemmEngine::OpenBLAS: return "openblas";
    case GemmEngine::OneDNN: return "onednn";
    case GemmEngine::Amx: return "amx";
    case GemmEngine::Avx512: return "avx512";
    default: return "auto";
  }
}
const char* gemm_precision_name(GemmPrecision p) { return p == GemmPrecision::BF16 ? "bf16" : "fp32"; }

// Measured (README "GEMM engines"): OpenBLAS sgemm beats oneDNN fp32 on the model's shapes;
// OpenBLAS has no bf16 GEMM, so bf16 goes to our AMX kernel where the CPU has AMX, else oneDNN.
static std::vector<Bf16Mirror> g_mirrors;  // sorted by base
void gemm_set_bf16_mirrors(std::vector<Bf16Mirror> m) {
  std::erase_if(m, [](const Bf16Mirror& x) { return !x.data; });
  std::sort(m.begin(), m.end(), [](const Bf16Mirror& a, const Bf16Mirror& b) { return a.base < b.base; });
  g_mirrors = std::move(m);
}
void gemm_set_bf16_mirror(const Bf16Mirror& m) { gemm_set_bf16_mirrors({m}); }
const std::vector<Bf16Mirror>& gemm_bf16_mirrors() { return g_mirrors; }
static std::vector<Bf16Mirror> g_act_mirrors;
void gemm_set_activation_mirrors(const std::vector<Bf16Mirror>& m) { g_act_mirrors = m; }
const std::vector<Bf16Mirror>& gemm_activation_mirrors() { return g_act_mirrors; }
static bool g_copies = true;
void gemm_set_activation_copies(bool on) { g_copies = on; }
bool gemm_activation_copies_on() {
  return g_copies && gemm_settings().precision == GemmPrecision::BF16 && bf16_gemm_supported();
}
ActivationMirrorScope::ActivationMirrorScope(std::initializer_list<Bf16Mirror> add) : prev_(g_act_mirrors) {
  for (const Bf16Mirror& m : add)
    if (m.data) g_act_mirrors.push_back(m);
}
ActivationMirrorScope::~ActivationMirrorScope() { g_act_mirrors = prev_; }

// ZAYA_GEMM_ENGINE, read once (Auto when unset).
static GemmEngine forced_engine() {
  static GemmEngine forced = [] {
    const char* e = std::getenv("ZAYA_GEMM_ENGINE");
    if (!e || !*e || !std::strcmp(e, "auto")) return GemmEngine::Auto;
    if (!std::strcmp(e, "openblas")) return GemmEngine::OpenBLAS;
    if (!std::strcmp(e, "onednn")) return GemmEngine::OneDNN;
    if (!std::strcmp(e, "amx")) return GemmEngine::Amx;
    if (!std::strcmp(e, "avx512")) return GemmEngine::Avx512;
    fail("ZAYA_GEMM_ENGINE='", e, "': expected auto, openblas, onednn, amx or avx512");
  }();
  return forced;
}

GemmEngine gemm_resolve(GemmPrecision prec) {
  GemmEngine e = gemm_settings().engine != GemmEngine::Auto ? gemm_settings().engine : forced_engine();
  if (prec == GemmPrecision::BF16) {  // OpenBLAS (Debian) has no bf16 GEMM
    if (e == GemmEngine::OneDNN) return e;
    if (e != GemmEngine::Avx512 && amx_bf16_usable()) return GemmEngine::Amx;
    return gemm_bf16_avx512_usable() ? GemmEngine::Avx512 : GemmEngine::OneDNN;
  }
  if ((e == GemmEngine::Avx512 || e == GemmEngine::Auto) && gemm_f32_usable()) return GemmEngine::Avx512;
  return e == GemmEngine::OneDNN ? e : GemmEngine::OpenBLAS;
}

static bool g_stats_on = false;
GemmStats& gemm_stats() {
  static GemmStats s;
  return s;
}
void gemm_stats_enable(bool on) { g_stats_on = on; }

namespace {

CBLAS_TRANSPOSE cb(Trans t) { return t == Trans::N ? CblasNoTrans : CblasTrans; }

struct Dnnl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mu;
  using Key = std::tuple<int, int, int, int, int, long, long, long, float, float, int>;
  std::map<Key, dnnl::matmul> cache;

  static Dnnl& get() {
    static Dnnl d;
    return d;
  }

  // Strides of a row-major operand op(X)[rows, cols] stored with leading dim ld.
  static dnnl::memory::dims strides(Trans t, long ld) {
    return t == Trans::N ? dnnl::memory::dims{ld, 1} : dnnl::memory::dims{1, ld};
  }

  dnnl::matmul& prim(dnnl::memory::data_type dt, Trans ta, Trans tb, int M, int N, int K, long lda, long ldb,
                     long ldc, float alpha, float beta) {
    Key key{int(dt), int(ta), int(tb), M, N, K, lda, ldb, ldc, alpha, beta};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    using md = dnnl::memory::desc;
    md a({M, K}, dt, strides(ta, lda));
    md b({K, N}, dt, strides(tb, ldb));
    md c({M, N}, dnnl::memory::data_type::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (alpha != 1.f) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, alpha, 0.f);
    if (beta != 0.f) po.append_sum(beta);
    attr.set_post_ops(po);
    auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, eng);
    return cache.emplace(key, dnnl::matmul(pd)).first->second;
  }
};

// Packs op-storage of X (rows x cols with leading dim ld) into bf16, contiguous, with zero
// rows and columns up to rows_pad x cols_pad (0: no padding).
void pack_bf16(const float* X, int rows, int cols, int ld, std::vector<bf16>& out, int rows_pad = 0,
               int cols_pad = 0) {
  const int rp = std::max(rows, rows_pad), cp = std::max(cols, cols_pad);
  if (out.size() < size_t(rp) * cp) out.resize(size_t(rp) * cp);  // never down: up again would zero it all
  bf16* o = out.data();
#pragma omp parallel for schedule(static) if (size_t(rows) * cols > (1u << 15))
  for (int r = 0; r < rp; ++r) {
    int c = 0;
    if (r < rows)
      for (; c < cols; ++c) o[size_t(r) * cp + c] = to_bf16(X[size_t(r) * ld + c]);
    for (; c < cp; ++c) o[size_t(r) * cp + c] = bf16{0};
  }
}

// One oneDNN matmul: A [M, K] and B [K, N] of `type` as op-storage with leading dims la/lb,
// C fp32 (C = alpha op(A) op(B) + beta C).
void dnnl_execute(dnnl::memory::data_type type, Trans ta, Trans tb, int M, int N, int K, float alpha, const void* A,
                  long la, const void* B, long lb, float beta, float* C, int ldc) {
  Dnnl& d = Dnnl::get();
  std::lock_guard<std::mutex> lock(d.mu);
  auto& p = d.prim(type, ta, tb, M, N, K, la, lb, ldc, alpha, beta);
  using md = dnnl::memory::desc;
  dnnl::memory am(md({M, K}, type, Dnnl::strides(ta, la)), d.eng, const_cast<void*>(A));
  dnnl::memory bm(md({K, N}, type, Dnnl::strides(tb, lb)), d.eng, const_cast<void*>(B));
  dnnl::memory cm(md({M, N}, dnnl::memory::data_type::f32, dnnl::memory::dims{ldc, 1}), d.eng, C);
  p.execute(d.strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  d.strm.wait();
}

// An operand's bf16 copy and its leading dim; p == nullptr: none.
struct Mirrored {
  const bf16* p = nullptr;
  long ld = 0;
  explicit operator bool() const { return p != nullptr; }
};

// The copy of X (rows x cols with leading dim ld) in mirror m, if X lies wholly inside it.
Mirrored mirror_lookup(const Bf16Mirror& m, const float* X, int rows, int cols, int ld) {
  if (!m.data || !X || X < m.base) return {};
  const size_t off = size_t(X - m.base), extent = size_t(rows - 1) * size_t(ld) + size_t(cols);
  if (off + extent > m.n) return {};
  if (m.row == 0) return {m.data + off, ld};
  const size_t row = size_t(m.row);
  if ((rows > 1 && size_t(ld) != row) || off % row + size_t(cols) > row) return {};
  return {m.data + 2 * row * (off / row) + off % row, long(2 * row)};
}
// X's copy in the weights' mirrors (the one whose base is the last at or below X). An operand
// that starts inside an interleaved mirror must be a block of its rows: its fp32 storage holds
// no plain values to round instead.
Mirrored weight_lookup(const float* X, int rows, int cols, int ld) {
  auto it = std::upper_bound(g_mirrors.begin(), g_mirrors.end(), X,
                             [](const float* x, const Bf16Mirror& m) { return x < m.base; });
  if (it == g_mirrors.begin()) return {};
  const Bf16Mirror& m = *std::prev(it);
  const Mirrored w = mirror_lookup(m, X, rows, cols, ld);
  ZAYA_CHECK(w || m.row == 0 || size_t(X - m.base) >= m.n, "gemm: a ", rows, " x ", cols, " operand (leading dim ", ld,
             ") inside split weights with rows of ", m.row, " is not a block of their rows");
  return w;
}
Mirrored mirrored(const float* X, int rows, int cols, int ld) {
  if (Mirrored w = weight_lookup(X, rows, cols, ld)) return w;
  for (const Bf16Mirror& m : g_act_mirrors)
    if (Mirrored a = mirror_lookup(m, X, rows, cols, ld)) return a;
  return {};
}

// X as bf16: its mirror copy m, or a fresh rounding into buf (leading dim cols).
const bf16* as_bf16(Mirrored m, const float* X, int rows, int cols, int ld, std::vector<bf16>& buf, long& ld_out) {
  if (m) {
    ld_out = m.ld;
    return m.p;
  }
  pack_bf16(X, rows, cols, ld, buf);
  ld_out = cols;
  return buf.data();
}

// pack_bf16's padded block from X's bf16 copy m when there is one (no rounding), else from X.
void pack_padded(Mirrored m, const float* X, int rows, int cols, int ld, std::vector<bf16>& out, int rows_pad,
                 int cols_pad) {
  if (!m) return pack_bf16(X, rows, cols, ld, out, rows_pad, cols_pad);
  const int rp = std::max(rows, rows_pad), cp = std::max(cols, cols_pad);
  out.assign(size_t(rp) * cp, bf16{0});
#pragma omp parallel for schedule(static) if (size_t(rows) * cols > (1u << 15))
  for (int r = 0; r < rows; ++r) std::memcpy(&out[size_t(r) * cp], m.p + size_t(r) * m.ld, sizeof(bf16) * cols);
}

// A bf16 product's shapes are kept to a bounded set, so that oneDNN creates each primitive
// once and then finds it in the cache: the rows an expert receives change every step, and a
// primitive's creation (JIT) costs ~1 ms, about as much as the product itself. M is cut into
// a multiple of kRowStep and a tail padded to a multiple of kTailStep; K of a product of two
// activations (a dW product's token count) is padded with zeros to a multiple of kDepthStep.
// Rows are independent and the zeros add nothing, so the results are the same products.
constexpr int kRowStep = 64, kTailStep = 16, kDepthStep = 64;

int round_up(int x, int step) { return (x + step - 1) / step * step; }

// a16_given / b16_given (nullable): that operand already in bf16 (leading dim lda / ldb),
// used as stored like a mirror copy (A / B may then be null). engine: OneDNN, or our bf16
// kernels (Amx, Avx512), which take any shape and strides.
void dnnl_gemm(GemmPrecision prec, Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc, const bf16* a16_given = nullptr,
               const bf16* b16_given = nullptr, GemmEngine engine = GemmEngine::OneDNN) {
  if (prec != GemmPrecision::BF16)
    return dnnl_execute(dnnl::memory::data_type::f32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  static thread_local std::vector<bf16> abuf, bbuf, tbuf;
  static thread_local std::vector<float> cbuf;
  const int ar = ta == Trans::N ? M : K, ac = ta == Trans::N ? K : M;
  const int br = tb == Trans::N ? K : N, bc = tb == Trans::N ? N : K;
  const Mirrored ma = a16_given ? Mirrored{a16_given, lda} : mirrored(A, ar, ac, lda);
  const Mirrored mb = b16_given ? Mirrored{b16_given, ldb} : mirrored(B, br, bc, ldb);
  if (engine == GemmEngine::Amx || engine == GemmEngine::Avx512) {  // shapes and strides as they are
    long la = 0, lb = 0;
    const bf16* a16 = as_bf16(ma, A, ar, ac, lda, abuf, la);
    const bf16* b16 = as_bf16(mb, B, br, bc, ldb, bbuf, lb);
    return gemm_bf16_kernel(engine, ta, tb, M, N, K, alpha, a16, la, b16, lb, beta, C, ldc);
  }
  // oneDNN: a product with a weight has a model dimension for K; only activation-by-activation
  // products (dW = dY^T X over the tokens an expert got) need the padding.
  const bool weight = weight_lookup(A, ar, ac, lda) || weight_lookup(B, br, bc, ldb);
  const int Kp = K % kDepthStep && !weight ? round_up(K, kDepthStep) : K;
  long la = 0, lb = 0;
  const bf16 *a16, *b16;
  if (Kp == K) {
    a16 = as_bf16(ma, A, ar, ac, lda, abuf, la);
    b16 = as_bf16(mb, B, br, bc, ldb, bbuf, lb);
  } else {  // K runs along A's storage columns (N) or rows (T), and B's rows (N) or columns (T)
    pack_padded(ma, A, ar, ac, lda, abuf, ta == Trans::N ? 0 : Kp, ta == Trans::N ? Kp : 0);
    pack_padded(mb, B, br, bc, ldb, bbuf, tb == Trans::N ? Kp : 0, tb == Trans::N ? 0 : Kp);
    a16 = abuf.data(), la = ta == Trans::N ? Kp : M;
    b16 = bbuf.data(), lb = tb == Trans::N ? N : Kp;
  }
  const int Mm = M / kRowStep * kRowStep, r = M - Mm;  // M = 64 (a conv dW product) runs as stored
  if (Mm && ldc == N) {
    dnnl_execute(dnnl::memory::data_type::bf16, ta, tb, Mm, N, Kp, alpha, a16, la, b16, lb, beta, C, ldc);
  } else if (Mm) {
    // oneDNN 2.6 runs a strided C (a slice of a wider row) on its AVX-512 gemm, not the AMX
    // kernel (measured 3-6x slower at CCA's conv shapes): go through a contiguous block.
    cbuf.resize(size_t(Mm) * N);
    if (beta != 0.f)
      for (int i = 0; i < Mm; ++i) std::memcpy(&cbuf[size_t(i) * N], C + size_t(i) * ldc, sizeof(float) * N);
    dnnl_execute(dnnl::memory::data_type::bf16, ta, tb, Mm, N, Kp, alpha, a16, la, b16, lb, beta, cbuf.data(), N);
    for (int i = 0; i < Mm; ++i) std::memcpy(C + size_t(i) * ldc, &cbuf[size_t(i) * N], sizeof(float) * N);
  }
  if (!r) return;
  // The tail rows of op(A), as a zero-padded [rp, Kp] block, into a scratch C block.
  const int rp = round_up(r, kTailStep);
  tbuf.assign(size_t(rp) * Kp, bf16{0});
  for (int i = 0; i < r; ++i)
    for (int k = 0; k < Kp; ++k)
      tbuf[size_t(i) * Kp + k] = ta == Trans::N ? a16[size_t(Mm + i) * la + k] : a16[size_t(k) * la + Mm + i];
  cbuf.assign(size_t(rp) * N, 0.f);
  float* ct = C + size_t(Mm) * ldc;
  if (beta != 0.f)
    for (int i = 0; i < r; ++i) std::memcpy(&cbuf[size_t(i) * N], ct + size_t(i) * ldc, sizeof(float) * N);
  dnnl_execute(dnnl::memory::data_type::bf16, Trans::N, tb, rp, N, Kp, alpha, tbuf.data(), Kp, b16, lb, beta,
               cbuf.data(), N);
  for (int i = 0; i < r; ++i) std::memcpy(ct + size_t(i) * ldc, &cbuf[size_t(i) * N], sizeof(float) * N);
}

bool timing_on() { return g_stats_on || prof::enabled(); }

// Start times on both clocks: gemm_stats' wall clock and the profile's (which may be thread CPU time).
struct GemmT0 {
  double wall = 0, prof = 0;
};
GemmT0 gemm_t0() {
  GemmT0 t;
  if (g_stats_on) t.wall = now_seconds();
  if (prof::enabled()) t.prof = prof::now();
  return t;
}

void record_flops(const GemmT0& t0, double flops) {
  if (!timing_on() || omp_in_parallel()) return;  // a parallel region is timed whole (GemmRegion)
  if (prof::enabled()) prof::add_gemm(prof::now() - t0.prof, flops);
  if (!g_stats_on) return;
  auto& s = gemm_stats();
  s.seconds += now_seconds() - t0.wall;
  s.flops += flops;
  s.calls++;
}

void record_gemm(const GemmT0& t0, int M, int N, int K) { record_flops(t0, 2.0 * M * N * K); }

}  // namespace

void gemm_bf16_weights(int M, int N, int K, const float* x, int ldx, const bf16* W, float beta, float* y, int ldy) {
  if (M == 0 || N == 0) return;
  const GemmT0 t0 = gemm_t0();
  static thread_local std::vector<bf16> abuf;
  pack_bf16(x, M, K, ldx, abuf);
  const GemmEngine e = gemm_engine_for(GemmEngine::Auto, GemmPrecision::BF16, Trans::N, M, N, K);
  if (e == GemmEngine::Amx || e == GemmEngine::Avx512)
    gemm_bf16_kernel(e, Trans::N, Trans::T, M, N, K, 1.f, abuf.data(), K, W, K, beta, y, ldy);
  else
    dnnl_execute(dnnl::memory::data_type::bf16, Trans::N, Trans::T, M, N, K, 1.f, abuf.data(), K, W, K, beta, y, ldy);
  record_gemm(t0, M, N, K);
}

void gemm_f32_row_tiles(int M, int N, int K, const float* x, int ldx, float beta, float* y, int ldy,
                        const std::function<void(int n, float* dst)>& row) {
  if (M == 0 || N == 0) return;
  const int tile = std::max(16, std::min(N, int((size_t(8) << 20) / (size_t(K) * sizeof(float)))));
  static thread_local std::vector<float> wt;
  wt.resize(size_t(tile) * K);
  float* w = wt.data();  // (inside the region below, wt would be each thread's own)
  for (int n0 = 0; n0 < N; n0 += tile) {
    const int nr = std::min(tile, N - n0);
#pragma omp parallel for schedule(static) if (size_t(nr) * K > 65536)
    for (int r = 0; r < nr; ++r) row(n0 + r, w + size_t(r) * K);
    gemm(Trans::N, Trans::T, M, nr, K, 1.f, x, ldx, w, K, beta, y + n0, ldy);
  }
}

void gemm_bf16_kernel(GemmEngine engine, Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A,
                      long lda, const bf16* B, long ldb, float beta, float* C, long ldc) {
  ZAYA_CHECK(engine == GemmEngine::Amx || engine == GemmEngine::Avx512, "gemm_bf16_kernel: engine ",
             gemm_engine_name(engine), " is not one of our bf16 kernels");
  if (engine == GemmEngine::Amx) return gemm_amx_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  gemm_bf16_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool gemm_concurrent_ok() {
  const GemmPrecision p = gemm_settings().precision == GemmPrecision::BF16 && bf16_gemm_supported()
                              ? GemmPrecision::BF16
                              : GemmPrecision::F32;
  return gemm_resolve(p) != GemmEngine::OneDNN;
}

GemmRegion::GemmRegion(double flops) : flops_(flops) {
  const GemmT0 t = gemm_t0();
  wall0_ = t.wall, prof0_ = t.prof;
}
GemmRegion::~GemmRegion() { record_flops(GemmT0{wall0_, prof0_}, flops_); }

const bf16* gemm_activation_copy(const float* X, size_t n) {
  for (const Bf16Mirror& m : g_act_mirrors)  // X[0, n) as one row
    if (Mirrored a = mirror_lookup(m, X, 1, int(n), int(n))) return a.p;
  return nullptr;
}

void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, GemmOperand A, GemmOperand B, float beta,
               float* C, int ldc) {
  ZAYA_CHECK(bf16_gemm_supported(), "gemm_bf16: this CPU has no AVX512-BF16/AMX");
  ZAYA_CHECK((A.f32 || A.b16) && (B.f32 || B.b16), "gemm_bf16: an operand has no data");
  if (M == 0 || N == 0) return;
  ZAYA_CHECK(K > 0, "gemm_bf16: K must be positive");
  const GemmT0 t0 = gemm_t0();
  dnnl_gemm(GemmPrecision::BF16, ta, tb, M, N, K, alpha, A.b16 ? nullptr : A.f32, A.ld, B.b16 ? nullptr : B.f32, B.ld,
            beta, C, ldc, A.b16, B.b16, gemm_engine_for(GemmEngine::Auto, GemmPrecision::BF16, ta, M, N, K));
  record_gemm(t0, M, N, K);
}

namespace {

void scale_c(int M, int N, float beta, float* C, int ldc) {  // BLAS semantics for K == 0
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = beta == 0.f ? 0.f : beta * C[size_t(i) * ldc + j];
}

// OpenBLAS sgemm on all threads where OpenBLAS is the fp32 engine (CPUs without AVX-512): one
// contiguous share of C's rows (M >= N) or columns per thread, each a single-threaded sgemm
// (OpenBLAS's OpenMP build runs serially inside a parallel region), instead of OpenBLAS's own
// split. On a Zen 3 at 2 threads: the LM head's dE (8192 x 512 x 2048, A transposed) 127 -> 150
// GFLOP/s median alone; the zaya1-small step 1.024x median, 1.023x best over 10 interleaved
// rounds (bench/ab_step.sh). The last bits may differ from OpenBLAS's own split, as its
// threaded products differ from its single-threaded ones (their row tails take other kernels).
// Smaller products stay on OpenBLAS's own threading.
constexpr double kSharedMinMacs = 64.0 * 1024 * 1024;
void sgemm_shared(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                  int ldb, float beta, float* C, int ldc) {
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (nt <= 1 || double(M) * N * K < kSharedMinMacs || std::max(M, N) < 2 * nt ||
      gemm_resolve(GemmPrecision::F32) != GemmEngine::OpenBLAS)
    return cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const bool rows = M >= N;
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads(), total = rows ? M : N;
    const int s0 = int(long(total) * t / n), s1 = int(long(total) * (t + 1) / n);
    if (rows)
      cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), s1 - s0, N, K, alpha, ta == Trans::N ? A + size_t(s0) * lda : A + s0,
                  lda, B, ldb, beta, C + size_t(s0) * ldc, ldc);
    else
      cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), M, s1 - s0, K, alpha, A, lda,
                  tb == Trans::N ? B + s0 : B + size_t(s0) * ldb, ldb, beta, C + s0, ldc);
  }
}

}  // namespace

GemmEngine gemm_engine_for(GemmEngine engine, GemmPrecision prec, Trans ta, int M, int N, int K) {
  if (prec == GemmPrecision::BF16 && !bf16_gemm_supported()) prec = GemmPrecision::F32;
  // Auto, nothing forced: our AVX-512 kernels but for the largest products (gemm_avx512_suits).
  const bool by_shape = engine == GemmEngine::Auto && gemm_settings().engine == GemmEngine::Auto &&
                        forced_engine() == GemmEngine::Auto;
  if (engine == GemmEngine::Auto) engine = gemm_resolve(prec);
  if (by_shape && engine == GemmEngine::Avx512 && !gemm_avx512_suits(ta, M, N, K))
    engine = prec == GemmPrecision::F32 ? GemmEngine::OpenBLAS : GemmEngine::OneDNN;
  if (engine == GemmEngine::Amx && (prec != GemmPrecision::BF16 || !amx_bf16_usable()))
    engine = gemm_resolve(prec);  // the AMX kernel multiplies bf16 on AMX only
  if (engine == GemmEngine::Avx512 &&
      !(prec == GemmPrecision::F32 ? gemm_f32_usable() : gemm_bf16_avx512_usable()))
    engine = gemm_resolve(prec);  // the AVX-512 kernels: fp32 on AVX-512F, bf16 on AVX512-BF16
  if (prec == GemmPrecision::BF16 && engine == GemmEngine::OpenBLAS) engine = GemmEngine::OneDNN;  // no bf16 sgemm
  return engine;
}

void gemm_with(GemmEngine engine, GemmPrecision prec, Trans ta, Trans tb, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  const GemmT0 t0 = gemm_t0();
  if (prec == GemmPrecision::BF16 && !bf16_gemm_supported()) {
    static bool warned = false;
    if (!warned) log_warn("this CPU has no AVX512-BF16/AMX: bf16 GEMMs run in fp32");
    warned = true;
    prec = GemmPrecision::F32;
  }
  engine = gemm_engine_for(engine, prec, ta, M, N, K);
  if (prec == GemmPrecision::BF16 || engine == GemmEngine::OneDNN)
    dnnl_gemm(prec, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, nullptr, engine);
  else if (engine == GemmEngine::Avx512)
    gemm_f32_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    sgemm_shared(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  record_gemm(t0, M, N, K);
}

void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  gemm_with(GemmEngine::Auto, gemm_settings().precision, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
          int ldb, double beta, double* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C[size_t(i) * ldc + j] = beta == 0 ? 0 : beta * C[size_t(i) * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, cb(ta), cb(tb), M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_serial(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  if (gemm_engine_for(GemmEngine::Auto, GemmPrecision::F32, ta, M, N, K) == GemmEngine::Avx512)
    return gemm_f32_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, /*serial=*/true);
  cblas_sgemm(CblasRowMajor, cb(ta), cb(tb), M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_serial(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
                 int ldb, double beta, double* C, int ldc) {
  gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char* blas_core_upgrade(const CpuFeatures& f, const char* core) {
  // Any core without the CPU's widest kernels: Haswell/Zen on an AVX-512 CPU (the image's
  // pin), or a generic fallback such as Prescott, which DYNAMIC_ARCH picks for a CPU model it
  // does not know (a VM's "Intel Xeon Processor" with AMX was seen to get Prescott's SSE3
  // kernels).
  auto one_of = [core](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!strcasecmp(core, n)) return true;
    return false;
  };
  const bool avx512_kernels = one_of({"SkylakeX", "Cooperlake", "SapphireRapids"});
  if (f.avx512f) return avx512_kernels ? nullptr : "SkylakeX";
  if (f.avx2 && f.fma) return avx512_kernels || one_of({"Haswell", "Zen"}) ? nullptr : "Haswell";
  return nullptr;
}

void maybe_reexec_for_blas_core(char** argv) {
  const char* pref = std::getenv("ZAYA_BLAS_CORE");
  if ((pref && !std::strcmp(pref, "keep")) || std::getenv("ZAYA_BLAS_REEXEC")) return;
  const char* want = blas_core_upgrade(cpu_features(), openblas_get_corename());
  if (!want) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  setenv("ZAYA_BLAS_REEXEC", "1", 1);  // never loop
  execv("/proc/self/exe", argv);  // returns only on failure: then carry on with what we have
}

std::string gemm_runtime_info() {
  const auto& f = cpu_features();
  const dnnl_version_t* v = dnnl_version();
  int par = openblas_get_parallel();
  return cat("BLAS: OpenBLAS ", openblas_get_config(), " core=", openblas_get_corename(),
             " threading=", par == 0 ? "sequential" : par == 1 ? "pthreads" : "openmp", "; oneDNN ", v->major, ".",
             v->minor, ".", v->patch, "; threads=", omp_get_max_threads(), "; cpu: avx2=", f.avx2,
             " fma=", f.fma, " avx512f=", f.avx512f, " avx512_bf16=", f.avx512_bf16, " amx_bf16=", f.amx_bf16,
             "; fp32 engine=", gemm_engine_name(gemm_resolve(GemmPrecision::F32)),
             ", bf16 engine=",
             bf16_gemm_supported() ? gemm_engine_name(gemm_resolve(GemmPrecision::BF16)) : "unavailable (fp32 fallback)");
}

}  // namespace zaya
