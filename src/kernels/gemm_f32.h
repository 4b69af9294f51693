// fp32 GEMM on AVX-512 FMA, hand-written for the trainer's shapes: C[M, N] = alpha op(A)[M, K]
// op(B)[K, N] + beta C, fp32 throughout.
//
// Why our own: OpenBLAS is near the FMA peak on one thread at these shapes, but its threads
// split small products poorly (zaya1-small's 2048 x 128 x 512 projections, 256-row experts,
// dW over 2048 tokens reach 0.55-0.75 of the 2-thread peak). Here:
//   - op(B) is packed once per call into 32-column panels ([k][32], zero columns past N);
//   - op(A) is read in place, whichever way it is stored: each FMA broadcasts one element;
//   - a 12 x 32 block of C lives in 24 registers over a K block of kKC, the A rows of the
//     block in L1 while it sweeps a chunk of B panels kept in L2;
//   - threads split rows when A is the larger operand, else columns (each packs only its own
//     panels); each element's sum order, and so the result, does not depend on the thread count.
#pragma once
#include "kernels/gemm.h"

namespace zaya {

// True when the CPU has AVX-512F (the kernel's only requirement).
bool gemm_f32_usable();

// ld* in elements. Any M, N, K >= 1. On the calling thread alone when `serial` or inside a
// parallel region, else on all of omp_get_max_threads().
void gemm_f32_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, long lda,
                     const float* B, long ldb, float beta, float* C, long ldc, bool serial = false);

// Whether the default engine gives this product to the kernel: all but the largest. With C
// of 4M elements or more or K beyond 4096 (the LM head's three products at zaya1-small's shapes)
// OpenBLAS's blocking of C measured up to 1.2x faster; below that this kernel measured
// 1.0-1.5x OpenBLAS at 2 threads (zaya1-small's projections, experts, router, attention).
bool gemm_f32_suits(int M, int N, int K);

}  // namespace zaya
