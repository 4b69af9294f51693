// The instruction-set tier of the decode kernels (linear_quant, linear_bf16). Each picks the
// best its CPU has at run time: AVX-512 (VNNI, BF16) where present, else AVX2, else portable
// loops. A cap (linear_quant_force, linear_bf16_force) holds a whole process at AVX2 or at
// the portable loops, so that tests check every tier and benches compare them on one CPU.
#pragma once

namespace zaya {

enum class KernelTier { Auto, Avx2, Portable };

}  // namespace zaya
