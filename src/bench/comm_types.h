// Internal to src/bench/comm_*.cpp: typed access to the element types of zaya bench comm.
#pragma once
#include <cstdint>
#include <type_traits>

#include "bench/comm_bench.h"
#include "core/bf16.h"
#include "core/error.h"

namespace zaya::bench {

struct half_t {
  uint16_t bits;
};

template <class T>
inline constexpr bool is_16bit_float = std::is_same_v<T, bf16> || std::is_same_v<T, half_t>;

template <class T>
inline double load(const T& v) {
  if constexpr (std::is_same_v<T, bf16>) return from_bf16(v);
  else if constexpr (std::is_same_v<T, half_t>) return from_fp16(v.bits);
  else return double(v);
}

template <class T>
inline T store(double v) {
  if constexpr (std::is_same_v<T, bf16>) return to_bf16(float(v));
  else if constexpr (std::is_same_v<T, half_t>) return half_t{float_to_half(float(v))};
  else if constexpr (std::is_floating_point_v<T>) return T(v);
  else return T(uint64_t(int64_t(v)));  // modular, like the wrapped integer reduction
}

// avg = sum / n, the same way in the benchmark (after an MPI sum) and in the check.
template <class T>
inline T avg_div(T s, int n) {
  if constexpr (is_16bit_float<T>) return store<T>(float(load(s)) / float(n));
  else if constexpr (std::is_floating_point_v<T>) return T(s / T(n));
  else return T(s / T(n));
}

// Calls f(T{}) with T the storage type of t.
template <class F>
inline decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::I8: return f(int8_t{});
    case DType::U8: return f(uint8_t{});
    case DType::I32: return f(int32_t{});
    case DType::U32: return f(uint32_t{});
    case DType::I64: return f(int64_t{});
    case DType::U64: return f(uint64_t{});
    case DType::F16: return f(half_t{});
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::BF16: return f(bf16{});
    default: break;
  }
  fail("collective benchmark: no payload of dtype ", dtype_name(t));
}

}  // namespace zaya::bench
