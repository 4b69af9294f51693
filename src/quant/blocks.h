// Block-quantized weight formats, bit for bit as llama.cpp (ggml) defines them, so a file's
// tensor data means the same to both:
//   q8_0: 32 weights  = fp16 d, int8 q[32];                    w = d * q
//   q4_0: 32 weights  = fp16 d, uint8 qs[16] (q[j] | q[j+16] << 4); w = d * (q - 8)
//   q4_k: 256 weights = fp16 d, fp16 dmin, uint8 scales[12], uint8 qs[128]: 8 sub-blocks of
//         32 with 6-bit scale s and min m;                     w = d * s * q - dmin * m
//         (qs: 4 chunks of 32 bytes; a chunk's low nibbles are sub-block 2c, high 2c+1)
//   q6_k: 256 weights = uint8 ql[128], uint8 qh[64], int8 scales[16], fp16 d: 16 sub-blocks
//         of 16 with an 8-bit scale s;                         w = d * s * (q - 32)
// A row of K weights is K / block consecutive blocks (K must be a multiple of the block).
#pragma once
#include <cstddef>
#include <cstdint>

namespace zaya::quant {

// GGUF / ggml tensor type ids.
enum class QType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30 };

constexpr int kQK = 32;    // q8_0 / q4_0 block
constexpr int kQKK = 256;  // k-quant super-block

// Packed (alignment 1): blocks sit at any byte address (a row after an odd-sized one, a
// tensor at a file offset), so their fp16 fields are read unaligned; a 2-aligned struct
// there is undefined behaviour (UBSan: misaligned member access).

struct __attribute__((packed)) BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct __attribute__((packed)) BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct __attribute__((packed)) BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};
struct __attribute__((packed)) BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ6_K) == 210);

// "q8_0", "bf16", ...; nullptr for an id this code does not read.
const char* qtype_name(uint32_t id);
bool qtype_known(uint32_t id);
// Elements per block and bytes per block (1 and the element size for F32/F16/BF16).
int qtype_block(QType t);
int qtype_block_bytes(QType t);
bool qtype_is_quantized(QType t);
// Bytes of a row of K weights; K must be a multiple of the block (checked by the caller).
inline size_t qtype_row_bytes(QType t, int64_t K) { return size_t(K / qtype_block(t)) * size_t(qtype_block_bytes(t)); }
// Parses "q8_0" / "q4_0" / "q4_k" / "q6_k" / "bf16" / "f32" (case-insensitive); false if unknown.
bool qtype_parse(const char* s, QType* out);

// IEEE half precision, rounded to nearest even (overflow to inf, NaN kept).
uint16_t fp32_to_fp16(float f);
float fp16_to_fp32(uint16_t h);

// Quantize / dequantize one row of K weights (K a multiple of the block).
void quantize_row(QType t, const float* x, void* dst, int64_t K);
void dequantize_row(QType t, const void* src, float* y, int64_t K);

// The 6-bit scale and min of q4_k sub-block j (0..7) from the 12 packed bytes.
inline void q4k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Checks a row's fp16 scales: returns the index of the first block whose scale (d, or dmin)
// is NaN or infinite, or -1 when all are finite.
int64_t first_bad_scale(QType t, const void* row, int64_t K);

}  // namespace zaya::quant
