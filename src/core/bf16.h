// bfloat16 storage type: the top 16 bits of an IEEE float, rounded to nearest even (weights:
// to nearest, ties away from zero; see split_hi).
#pragma once
#include <cstdint>
#include <cstring>
#include <cstddef>

namespace zaya {

struct bf16 {
  uint16_t bits;
};

// Without a branch, so that loops over it vectorise.
inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return bf16{uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded)};  // NaN: quiet
}

inline float from_bf16(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float from_fp16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { mant <<= 1; ++e; } while (!(mant & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The split of an fp32 value into a bf16 value and a 16-bit remainder, exactly invertible: the
// bf16 half is the value rounded to nearest with ties away from zero (round to nearest even
// is not invertible from 16 more bits: a tie and its neighbour give the same pair), the
// remainder is the value's low 16 bits. bf16 training keeps its fp32 master weights in this
// form (model/split_master.h), so that the bf16 weights the products read are half of the
// master's own storage rather than a second copy. Arithmetic on the bit patterns, modulo 2^16:
// every pattern (NaN and infinities included) comes back bit for bit.
inline uint16_t split_hi(uint32_t u) { return uint16_t((u + 0x8000u) >> 16); }
inline uint32_t split_join(uint16_t hi, uint16_t lo) {
  return uint32_t(uint16_t(hi - (lo >> 15))) << 16 | lo;
}
// The fp32 value a (bf16, low half) pair holds, and the pair of a value.
inline float split_value(uint16_t hi, uint16_t lo) {
  const uint32_t u = split_join(hi, lo);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void split_store(float f, uint16_t& hi, uint16_t& lo) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  hi = split_hi(u);
  lo = uint16_t(u);
}
// The bf16 weight of f as the split has it (what the model's bf16 weight copies hold).
inline bf16 to_bf16_weight(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16{split_hi(u)};
}

void convert_to_bf16(const float* src, bf16* dst, size_t n);
void convert_to_bf16_weights(const float* src, bf16* dst, size_t n);  // to_bf16_weight
void convert_from_bf16(const bf16* src, float* dst, size_t n);

}  // namespace zaya
