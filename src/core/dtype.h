// One element-type enum for every floor: tensors in files (safetensors' dtypes), weights in
// memory (F32 / BF16 arrays, or rows of llama.cpp blocks: model/weights.h's WeightDType), the
// GEMM precision (F32 or BF16: kernels/gemm.h's GemmPrecision) and collective payloads
// (bench/comm_bench.h). Each floor accepts the subset it handles and says so in its errors.
#pragma once
#include <cstddef>

namespace zaya {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U8, BOOL, Q8_0, Q4_0, Q4_K, Q6_K };

const char* dtype_name(DType t);  // "F32", "BF16", "Q4_K", ...: safetensors' and GGUF's spelling
size_t dtype_size(DType t);       // bytes per element; 0 for block formats (rows of blocks)

}  // namespace zaya
