// GEMMs on AVX-512, hand-written for the trainer's shapes: C[M, N] = alpha op(A)[M, K]
// op(B)[K, N] + beta C, fp32 accumulation and output. Two precisions, one driver:
//   - fp32 (gemm_f32_avx512): AVX-512 FMA;
//   - bf16 (gemm_bf16_avx512): AVX512-BF16 dot products (VDPBF16PS), operands bf16 as stored.
//     A pair of bf16 along K, (k, k+1), takes the place of one float: one 32-bit lane, one
//     dot product of two pairs per lane where fp32 does one FMA. K odd gets a zero partner.
//
// Why our own: OpenBLAS is near the FMA peak on one thread at these shapes, but its threads
// split small products poorly: in one `zaya bench gemm --preset configs/zaya1-small.toml
// --tokens 2048 --engine openblas,avx512` run at 2 threads, the 2048-row projections with
// N = 64-256 reached 0.60-0.76 of the nominal peak on OpenBLAS and 0.98-1.0 here. oneDNN's
// bf16 primitives are created per shape and serialised by a lock, so the experts' products
// cannot run side by side on them (gemm_side_by_side); ours can. Here:
//   - op(B) is packed into 32-column panels ([k][32] of 32-bit lanes, zero columns past N),
//     one K block at a time just before its products read it (still in L2), rows ahead
//     prefetched (operands arrive cold from DRAM in the trainer);
//   - op(A) is read in place when it is row-major with rows at most 2 KB apart (bf16: and
//     pairs 4-byte aligned); else (and always when transposed) packed four 12-row blocks at a
//     time as [k][12];
//   - a 12 x 32 block of C lives in 24 registers over a K block of 512 steps (per step: 2
//     loads of B, 12 broadcasts of A, 24 FMAs or dot products), the block's A in L1 while it
//     sweeps a chunk of B panels kept in L2;
//   - threads split rows when A is the larger operand, else columns (each packs only its own
//     panels); each element's sum order, and so the result, does not depend on the thread count.
#pragma once
#include "core/bf16.h"
#include "kernels/gemm.h"

namespace zaya {

// True when the CPU has AVX-512F (the fp32 kernel's only requirement).
bool gemm_f32_usable();
// True when the CPU has AVX-512BW and AVX512-BF16 (the bf16 kernel's).
bool gemm_bf16_avx512_usable();

// ld* in elements. Any M, N, K >= 1. On the calling thread alone when `serial` or inside a
// parallel region, else on all of omp_get_max_threads().
void gemm_f32_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, long lda,
                     const float* B, long ldb, float beta, float* C, long ldc, bool serial = false);
void gemm_bf16_avx512(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda,
                      const bf16* B, long ldb, float beta, float* C, long ldc, bool serial = false);

// Whether the default engine gives this product to the kernels: all but the largest with A
// transposed. With C of 4M elements or more or K beyond 4096 and A transposed (the LM head's
// weight gradient dE = dlogits^T X, 8192 x 512 x 2048 at zaya1-small), OpenBLAS measured
// 1.04-1.05x these kernels in fp32, and oneDNN 0.97-0.98x them in bf16 (a wash: it stays with
// oneDNN); the LM head's forward (2048 x 8192 x 512, B transposed) and dX (2048 x 512 x 8192)
// ran 0.99x and 1.01x OpenBLAS in fp32, 1.08x and 1.06x oneDNN in bf16 (`zaya bench gemm`,
// AMD Zen 5, 2 threads). Below that size these kernels measured 1.0-1.5x OpenBLAS and 0.9-1.1x
// oneDNN at 2 threads (zaya1-small's projections, experts, router).
bool gemm_avx512_suits(Trans ta, int M, int N, int K);

}  // namespace zaya
