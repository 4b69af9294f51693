// bf16 GEMM on Intel AMX (the tile registers and TDPBF16PS), hand-written for the trainer's
// shapes: C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C, operands bf16 as stored, fp32
// accumulation and output.
//
// Why our own: the trainer's products are small (2048 x 512 x 512 and below, experts of ~256
// rows, CCA's 64-wide groups with strided outputs) and oneDNN 2.6's matmul spends much of
// them outside the tile multiplies (bench_gemm_bf16 --kernel amx: the two engines are within 0.85-1.5x of
// each other per product, but a zaya1-small bf16 step is 1.2-1.3x faster on this kernel, with
// no row bucketing, depth padding or output copies). Here:
//   - op(B) is packed once per call into 16-column panels in the pairs-of-K ("VNNI") order
//     the tile multiply reads, K padded with zeros to a multiple of 32;
//   - op(A) is read in place when it is row-major with K a multiple of 32 and rows <= 2 KB
//     apart (the activations' bf16 copies), else packed tile by tile;
//   - each thread computes whole 32 x 32 blocks of C (2 x 2 tiles) over K in blocks of 2048,
//     loads ordered as oneDNN orders them, the previous block written out while the next
//     multiplies; the sum order, and so the result, does not depend on the thread count;
//   - rows are split between threads when A is the larger operand, else columns.
#pragma once
#include "core/bf16.h"
#include "kernels/gemm.h"

namespace zaya {

// True when the CPU has AMX-BF16 and Linux granted this process the tile state (asked once).
bool amx_bf16_usable();

// ld* in elements. Needs amx_bf16_usable(). Any M, N, K >= 1.
void gemm_amx_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda, const bf16* B,
                   long ldb, float beta, float* C, long ldc);

// The same kernel (packing, tile blocking, edges, thread split) with its tile operations
// emulated in scalar C++ (gemm_amx_impl.h): runs on any x86-64 CPU, so tests check the
// kernel's logic where there is no AMX. Emulates TDPBF16PS's rounding as the kernel's checks
// need it (fp32 sums of exact bf16 products, denormals as zero); not a fast path.
void gemm_amx_bf16_emulated(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda,
                            const bf16* B, long ldb, float beta, float* C, long ldc);

}  // namespace zaya
