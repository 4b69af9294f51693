#include "core/dtype.h"

namespace zaya {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U64: return "U64";
    case DType::U32: return "U32";
    case DType::U8: return "U8";
    case DType::BOOL: return "BOOL";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_K: return "Q4_K";
    case DType::Q6_K: return "Q6_K";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: return 1;
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_K: case DType::Q6_K: return 0;
  }
  return 0;
}

}  // namespace zaya
