// GEMM: the one entry point every matrix product in zaya.cpp goes through (model,
// benchmarks, sizing measurements). Row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta C.
//
// Engines: OpenBLAS (OpenMP build, linked explicitly), oneDNN, and our own kernels: fp32 on
// AVX-512 and bf16 on AVX512-BF16 (kernels/gemm_avx512.h), bf16 on AMX (kernels/gemm_amx.h).
// Precisions: fp32, and bf16 (operands rounded to bf16, fp32 accumulation and output; needs
// AVX512-BF16 or AMX, detected at run time). The default engine per precision is what
// measured fastest on our machines (see README, "GEMM engines"): fp32 our AVX-512 kernel
// where the CPU has AVX-512, OpenBLAS on CPUs without it; bf16 the AMX kernel where the CPU
// has AMX, else our AVX512-BF16 kernel, else oneDNN; the largest products with A transposed
// (gemm_avx512_suits) go from the AVX-512 kernels to OpenBLAS (fp32) and oneDNN (bf16). It can be forced with
// ZAYA_GEMM_ENGINE=openblas|onednn|amx|avx512 (onednn and avx512 apply to both precisions,
// amx to bf16 only, openblas to fp32 only: the other precision keeps its default); a forced
// engine takes every product of its precision, the largest included (no routing by shape), so
// a forced engine against the default compares more than the engine. Where
// OpenBLAS is the fp32 engine, products of 64M multiply-adds or more are cut into one share of
// rows or columns per thread, each a single-threaded sgemm (gemm.cpp's sgemm_shared).
// double always goes to OpenBLAS dgemm (gradient checks).
#pragma once
#include <omp.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bf16.h"
#include "core/dtype.h"

namespace zaya {

enum class Trans { N, T };
// F32 or BF16 of core/dtype.h: the element type the GEMM multiplies in (accumulation is F32).
using GemmPrecision = DType;
enum class GemmEngine { Auto, OpenBLAS, OneDNN, Amx, Avx512 };

struct GemmSettings {
  GemmPrecision precision = GemmPrecision::F32;
  GemmEngine engine = GemmEngine::Auto;
};

// Process-wide settings (the trainer sets precision once from the run config).
GemmSettings& gemm_settings();

void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);
void gemm(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc);

// Explicit engine and precision (benchmarks compare engines through this).
void gemm_with(GemmEngine engine, GemmPrecision prec, Trans ta, Trans tb, int M, int N, int K,
               float alpha, const float* A, int lda, const float* B, int ldb, float beta, float* C,
               int ldc);

// An operand of gemm_bf16: fp32 (rounded, or read from a mirror) or bf16 as stored (an
// activation written in bf16 by the op that produced it, possibly kept only in bf16).
struct GemmOperand {
  const float* f32 = nullptr;
  const bf16* b16 = nullptr;
  int ld = 0;
};
// A bf16 product, fp32 accumulation and output: C = alpha op(A) op(B) + beta C. Needs
// bf16_gemm_supported().
void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, GemmOperand A, GemmOperand B, float beta,
               float* C, int ldc);

// bf16 copies of fp32 arrays for the bf16 GEMMs: while a mirror is set, an operand that lies
// wholly inside [base, base + n) is read from data[operand - base] instead of being rounded
// to bf16 again. The model sets its weights' copy for the span of a forward or backward, so
// weights are rounded once per optimizer step (in the optimizer's pass), not once per product.
// row > 0: the copy is interleaved by rows, as bf16 training's split master weights store it
// (model/split_master.h): each row of `row` elements of [base, base + n) is `row` bf16 values
// followed by `row` other halves, in the row's own storage, so data[2 row i + j] is element
// (i, j). An operand is read from such a copy when its leading dim is `row` and its columns
// stay inside a row; its bf16 leading dim is then 2 row.
struct Bf16Mirror {
  const float* base = nullptr;
  size_t n = 0;
  const bf16* data = nullptr;
  int row = 0;
};
void gemm_set_bf16_mirror(const Bf16Mirror& m);  // Bf16Mirror{} clears
// The weights' copies as several disjoint mirrors (any order); {} clears.
void gemm_set_bf16_mirrors(std::vector<Bf16Mirror> m);
const std::vector<Bf16Mirror>& gemm_bf16_mirrors();  // sorted by base

// Activations' copies, by the same rule: the op that writes an activation a bf16 product will
// read (a norm's output) writes its bf16 copy in the same pass, and the model lists the
// copies for the span of its forward and backward, so the products forward and backward
// read them instead of rounding the activation again each time. {} clears.
void gemm_set_activation_mirrors(const std::vector<Bf16Mirror>& m);
const std::vector<Bf16Mirror>& gemm_activation_mirrors();
// The listed bf16 copy of X[0, n), or nullptr.
const bf16* gemm_activation_copy(const float* X, size_t n);
// Ops write the copies when this is true: bf16 products on (precision bf16 and a CPU that has
// them) and copies not switched off (tests switch them off: the step must not change by a bit).
bool gemm_activation_copies_on();
void gemm_set_activation_copies(bool on);
// Adds mirrors to the list for a scope (entries with data == nullptr are skipped).
class ActivationMirrorScope {
 public:
  explicit ActivationMirrorScope(std::initializer_list<Bf16Mirror> add);
  ~ActivationMirrorScope();
  ActivationMirrorScope(const ActivationMirrorScope&) = delete;
  ActivationMirrorScope& operator=(const ActivationMirrorScope&) = delete;

 private:
  std::vector<Bf16Mirror> prev_;
};

// The engine Auto resolves to for a precision.
GemmEngine gemm_resolve(GemmPrecision prec);
// The engine gemm_with(engine, prec, ...) runs an M x N x K product on (Auto by shape, and an
// engine that cannot multiply prec here replaced): what benchmarks label a row with.
GemmEngine gemm_engine_for(GemmEngine engine, GemmPrecision prec, Trans ta, int M, int N, int K);
const char* gemm_engine_name(GemmEngine e);
const char* gemm_precision_name(GemmPrecision p);

// What the CPU offers, detected at run time.
struct CpuFeatures {
  bool avx2 = false, fma = false, avx512f = false, avx512_bf16 = false, amx_bf16 = false;
};
const CpuFeatures& cpu_features();
bool bf16_gemm_supported();
// A bf16 product of operands as stored on one of our bf16 kernels, `engine` Amx or Avx512
// (what gemm_resolve(BF16) gives on CPUs with AMX or AVX512-BF16), lds in elements; on the
// calling thread alone inside a parallel region.
void gemm_bf16_kernel(GemmEngine engine, Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A,
                      long lda, const bf16* B, long ldb, float beta, float* C, long ldc);
// y[M, N] = x[M, K] W[N, K]^T (+ beta y) with W bf16 as stored (memory-mapped weights used in
// place, never converted), x rounded to bf16, fp32 accumulation, on the bf16 engine (the AMX
// kernel, or oneDNN's AVX512-BF16 matmul). Needs bf16_gemm_supported().
void gemm_bf16_weights(int M, int N, int K, const float* x, int ldx, const bf16* W, float beta, float* y, int ldy);
// y[M, N] = x[M, K] W[N, K]^T (+ beta y) for weights no GEMM reads as stored (bf16 on a CPU
// without a bf16 GEMM, block-quantized): row(n, dst) writes W's row n as K floats. The rows
// are widened ~8 MB at a time by all threads into one buffer, each tile one fp32 GEMM
// (OpenBLAS on CPUs without AVX-512). Prefill and scoring over such weights.
void gemm_f32_row_tiles(int M, int N, int K, const float* x, int ldx, float beta, float* y, int ldy,
                        const std::function<void(int n, float* dst)>& row);

// OpenBLAS's SkylakeX (AVX-512) kernels are the fastest on our AVX-512 AMD EPYC machines
// (3072^3 fp32: Haswell 0.109, Cooperlake 0.171, SkylakeX 0.187 TFLOP/s; bench/README.md),
// but the machine image pins OPENBLAS_CORETYPE=Haswell; and for a CPU model DYNAMIC_ARCH does
// not know it can pick a generic core (Prescott's SSE3 kernels: 2.7x slower than Haswell's
// at 2048 x 512 x 512 on a Zen 3).
// The core OPENBLAS_CORETYPE should name on a CPU with features f whose OpenBLAS runs `core`:
// SkylakeX on AVX-512 CPUs whose core has no AVX-512 kernels, Haswell on AVX2 + FMA CPUs whose
// core has no AVX2 kernels; nullptr when the core is right.
const char* blas_core_upgrade(const CpuFeatures& f, const char* core);
// OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the zaya binary calls this first
// thing in main(): where blas_core_upgrade names a core, it sets OPENBLAS_CORETYPE to it and
// re-executes itself (same pid, same arguments). ZAYA_BLAS_CORE=keep leaves OpenBLAS's
// choice alone.
void maybe_reexec_for_blas_core(char** argv);

// One line: BLAS library, its core and threading, oneDNN version and ISA, CPU features.
std::string gemm_runtime_info();

// Whether products of the current precision run inside a parallel region on the calling
// thread alone, side by side with the other threads' (our kernels and OpenBLAS do; oneDNN's
// primitives are serialised by a lock).
bool gemm_concurrent_ok();

// Products inside a parallel region are not timed one by one (the profile and gemm_stats
// count one thread's time); a caller that runs products side by side times the region with
// this instead: its wall time as GEMM time, with the region's FLOPs.
class GemmRegion {
 public:
  explicit GemmRegion(double flops);
  ~GemmRegion();
  GemmRegion(const GemmRegion&) = delete;
  GemmRegion& operator=(const GemmRegion&) = delete;

 private:
  double flops_, wall0_ = 0, prof0_ = 0;
};

// f(i) for i in [0, n), tasks of products with no data in common: side by side, one thread
// per task (dynamic order), when there are threads to spare and gemm_concurrent_ok(), timed
// as one GemmRegion of `flops`; else one after another on the calling thread's team (each
// product then split over the threads itself). Small products split over the threads scale
// poorly (zaya1-small's 256-row experts: 1.56x at 2 threads); our kernels sum in the same
// order on one thread as on many, so their results do not change (OpenBLAS's may, in the last
// bits: its threaded and single-threaded products take different tail kernels).
template <class F>
void gemm_side_by_side(int n, double flops, F&& f) {
  if (n > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() && gemm_concurrent_ok()) {
    GemmRegion region(flops);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) f(i);
    return;
  }
  for (int i = 0; i < n; ++i) f(i);
}

// gemm_side_by_side for a model's products of type T: side by side in fp32; in double (the
// gradient checks) one after the other, in order.
template <class T, class F>
void gemm_side_by_side_of(int n, double flops, F&& f) {
  if constexpr (std::is_same_v<T, float>)
    gemm_side_by_side(n, flops, f);
  else
    for (int i = 0; i < n; ++i) f(i);
}

// The input and the weight gradient of one product, f(0) and f(1): both read the same upstream
// gradient and write apart, with equal work, so they go side by side; `flops` counts both. Each
// of a small layer's (zaya1-small's router MLP, CCA's projections) ran 2-16% faster on a thread
// of its own than split over two (Zen 3, interleaved).
template <class T, class F>
void gemm_grads_side_by_side(double flops, F&& f) {
  gemm_side_by_side_of<T>(2, flops, f);
}

// Counters for profiling the share of step time spent in GEMMs.
struct GemmStats {
  double seconds = 0;
  double flops = 0;
  long calls = 0;
};
GemmStats& gemm_stats();
void gemm_stats_enable(bool on);

}  // namespace zaya

namespace zaya {
// Always-fp32/fp64 OpenBLAS product for use inside our own OpenMP parallel regions
// (attention per head): the OpenMP build of OpenBLAS runs single-threaded there.
void gemm_serial(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc);
void gemm_serial(Trans ta, Trans tb, int M, int N, int K, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc);
}  // namespace zaya
