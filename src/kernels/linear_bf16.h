// Linear layers over bf16 weights used in place (memory-mapped checkpoints):
//   y[M, N] = x[M, K] W[N, K]^T, W bf16 row-major, x rounded to bf16, fp32 accumulation.
// AVX512-BF16 (vdpbf16ps) when the CPU has it, else AVX2 (W widened, FMA; 4 x rows per pass
// over W where the CPU has no bf16 GEMM), else a portable loop (the same rounding of x, so
// all give the same sums up to their order). OpenMP over blocks of output rows; all M rows
// of x are done against a block of W while it is in L1, so a batch of decode rows shares
// each weight read.
#pragma once
#include <cstddef>

#include "core/bf16.h"
#include "kernels/kernel_tier.h"
#include "kernels/team_rows.h"

namespace zaya {

// From 16 rows of x on (prefill, scoring) the product is the bf16 GEMM over W in place (our
// AMX kernel, or oneDNN's AVX512-BF16 matmul without AMX), or on a CPU with neither, the fp32
// GEMM over W widened a tile of rows at a time (ZAYA_BF16_GEMM=own keeps this file's kernels,
// for comparisons); fewer rows (decode) are bound by the weight read and stay here.
// ldx, ldy: row strides (elements) of x and y. beta 0 overwrites y, 1 accumulates.
void linear_bf16(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int N, int K, float beta = 0.f);

// The same product inside an OpenMP region that is already running (decode runs a whole
// token in one region: a fork/join per product costs as much as a small product): every
// thread of the team calls it with the same arguments and computes one contiguous share of
// the output rows (even, or as `cuts` give them), and with `steal` also steps of other
// threads' shares left when its own is done (kernels/team_rows.h). No barrier at the end:
// the caller places one before y is read. Returns the rows this thread computed. More than
// linear_bf16_team_cut_rows() rows of x take blocks of W rows dynamically instead, ignore
// `cuts` and return 0 (with the AVX2 kernel, every count of rows takes `cuts`, without
// stealing above 4 rows: it runs 4 x rows at a time over the thread's share).
int linear_bf16_team(float* y, int ldy, const float* x, int ldx, const bf16* W, int M, int N, int K, float beta = 0.f,
                     const float* cuts = nullptr, TeamSteal* steal = nullptr);
int linear_bf16_team_cut_rows();

// Which kernel runs: "avx512bf16", "avx2" or "portable". linear_bf16_force caps the tier for
// the whole process (kernels/kernel_tier.h: tests, comparisons).
const char* linear_bf16_kernel();
void linear_bf16_force(KernelTier k);

}  // namespace zaya
