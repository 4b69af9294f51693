#include "kernels/gemm_amx.h"

// GCC 12's AVX-512 headers use _mm512_undefined_* inside inline intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/avx512_transpose.h"

// The kernel (gemm_amx_impl.h) compiled for AMX whatever -march says; it runs only after
// amx_bf16_usable() said yes. Every header the kernel needs is included above, so only its
// own functions take these targets.
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq")
#include "kernels/gemm_amx_impl.h"

namespace zaya {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// GCC's tile intrinsics are macros that paste the tile number into the instruction's text:
// each template argument goes to them as a literal.
#define ZAYA_TILE_SWITCH(T, OP)        \
  if constexpr (T == 0) OP(0);         \
  else if constexpr (T == 1) OP(1);    \
  else if constexpr (T == 2) OP(2);    \
  else if constexpr (T == 3) OP(3);    \
  else if constexpr (T == 4) OP(4);    \
  else if constexpr (T == 5) OP(5);    \
  else if constexpr (T == 6) OP(6);    \
  else OP(7)

// The tile unit as the instructions: eight 16 x 64-byte tiles.
struct HardwareTiles {
  static constexpr bool kVector = true;
  static void config() {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = kTile;
    _tile_loadconfig(&c);
  }
  template <int T>
  static __attribute__((always_inline)) void zero() {
#define ZAYA_OP(t) _tile_zero(t)
    ZAYA_TILE_SWITCH(T, ZAYA_OP);
#undef ZAYA_OP
  }
  template <int T>
  static __attribute__((always_inline)) void load(const void* base, long stride) {
#define ZAYA_OP(t) _tile_loadd(t, base, stride)
    ZAYA_TILE_SWITCH(T, ZAYA_OP);
#undef ZAYA_OP
  }
  // The kernel's four products: C tiles 0-3, A tiles 4-5, B tiles 6-7.
  template <int C, int A, int B>
  static __attribute__((always_inline)) void dp() {
    static_assert(C == (A - 4) * 2 + (B - 6), "the kernel multiplies tile 4 + m by 6 + n into 2m + n");
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    else if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    else _tile_dpbf16ps(3, 5, 7);
  }
  template <int T>
  static __attribute__((always_inline)) void store(void* base, long stride) {
#define ZAYA_OP(t) _tile_stored(t, base, stride)
    ZAYA_TILE_SWITCH(T, ZAYA_OP);
#undef ZAYA_OP
  }
  static void release() { _tile_release(); }
};
#undef ZAYA_TILE_SWITCH

void gemm_amx_bf16_hw(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda, const bf16* B,
                      long ldb, float beta, float* C, long ldc) {
  gemm_amx_run<HardwareTiles>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

}  // namespace zaya
#pragma GCC pop_options

namespace zaya {

bool amx_bf16_usable() {
  static const bool ok = [] {
    if (!cpu_features().amx_bf16) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // linux/arch/x86/include/uapi/asm/prctl.h
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

void gemm_amx_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda, const bf16* B,
                   long ldb, float beta, float* C, long ldc) {
  ZAYA_CHECK(amx_bf16_usable(), "gemm_amx_bf16: AMX-BF16 is not available");
  gemm_amx_bf16_hw(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zaya
