// bf16 GEMM on Intel AMX (the tile registers and TDPBF16PS), hand-written for the trainer's
// shapes: C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C, operands bf16 as stored, fp32
// accumulation and output.
//
// Why not oneDNN: oneDNN 2.6's matmul reaches 0.25-0.45 TFLOP/s of a 2-core Xeon's ~1.2 at
// zaya1-small's shapes (2048 x 512 x 512 and smaller); most of its time goes to set-up,
// copies and the threads' split, not to the tile multiplies. Here:
//   - op(B) is packed once per call into 16-column panels in the pairs-of-K ("VNNI") order
//     the tile multiply reads, K padded with zeros to a multiple of 32;
//   - op(A) is read in place when it is row-major with K a multiple of 32 (the activations'
//     bf16 copies), else packed (transposed or padded) likewise;
//   - each thread computes whole 32 x 32 blocks of C (2 x 2 tiles) over all of K, so the sum
//     order, and so the result, does not depend on the number of threads;
//   - rows are split between threads, and columns in chunks whose panels stay in L2.
#pragma once
#include "core/bf16.h"
#include "kernels/gemm.h"

namespace zaya {

// True when the CPU has AMX-BF16 and Linux granted this process the tile state (asked once).
bool amx_bf16_usable();

// ld* in elements. Needs amx_bf16_usable(). Any M, N, K >= 1.
void gemm_amx_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda, const bf16* B,
                   long ldb, float beta, float* C, long ldc);

}  // namespace zaya
