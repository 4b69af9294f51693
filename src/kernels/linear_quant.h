// Linear layers over block-quantized weights used in place (quant/blocks.h, memory-mapped
// GGUF): y[M, N] (+)= x[M, K] W[N, K]^T, W rows of K / block blocks.
//   Decode (M < 16): x is quantized to int8 with an fp32 scale per block, as llama.cpp
//   quantizes activations: per 32 (q8_0) against q8_0 and q4_0 weights, per 256 (q8_K)
//   against the k-quants, whose super-block is then one integer sum of sub-block scale times
//   dot product, scaled once. AVX-512 VNNI (vpdpbusd, vpdpwssd) where the CPU has it, else
//   AVX2 (vpmaddubsw, vpmaddwd: linear_quant_avx2.cpp), else a portable loop, all with the
//   same integer sums (chosen at run time; AVX2 takes q4_0's offset of 8 off in float).
//   Prefill (M >= 16): W is dequantized a tile of rows at a time into bf16 and multiplied on
//   the bf16 GEMM (gemm_bf16_weights: the matrix units) where the CPU has AVX512-BF16 or AMX;
//   without a bf16 GEMM the decode kernels take up to 127 rows (4 x rows per W row read) and
//   from 128 rows W goes into fp32 tiles for the fp32 GEMM (gemm_f32_row_tiles).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/kernel_tier.h"
#include "kernels/team_rows.h"
#include "quant/blocks.h"

namespace zaya {

// ldx, ldy: row strides (elements). beta 0 overwrites y, 1 accumulates. K must be a multiple
// of the type's block (quant::qtype_block).
void linear_quant(quant::QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                  float beta = 0.f);
// Inside a running OpenMP region, called by every thread with the same arguments: each
// computes one contiguous share of the output rows (even, or as `cuts` give them), and with
// `steal` (one x row) also steps of other threads' shares left when its own is done
// (kernels/team_rows.h). No barrier at the end. Returns the rows this thread computed.
int linear_quant_team(quant::QType t, float* y, int ldy, const float* x, int ldx, const void* W, int M, int N, int K,
                      float beta = 0.f, const float* cuts = nullptr, TeamSteal* steal = nullptr);

// The decode kernels the process runs: "avx512vnni", "avx2" or "portable", the best the CPU
// has. linear_quant_force caps them for the whole process (kernels/kernel_tier.h).
const char* linear_quant_kernel();
void linear_quant_force(KernelTier k);
// Tests: M rows from which prefill dequantizes tiles to bf16 (0 disables that path).
void linear_quant_set_gemm_rows(int rows);

// x as the decode kernels see it: int8 levels q[K] and one fp32 scale per `block` elements
// (x ~ d * q; block 32 or 256, K a multiple of it; activation_block gives the block a weight
// type's kernel takes). AVX-512 or AVX2 where the CPU has it (as linear_quant_force allows),
// the same bits any way.
int activation_block(quant::QType t);
void quantize_activations(const float* x, int K, int block, int8_t* q, float* d);

}  // namespace zaya
