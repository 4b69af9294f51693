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

// ld* in elements. Any M, N, K >= 1.
void gemm_f32_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, long lda,
                     const float* B, long ldb, float beta, float* C, long ldc);

}  // namespace zaya
