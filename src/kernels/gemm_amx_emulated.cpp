// The AMX kernel (gemm_amx_impl.h) on an emulated tile unit: the instructions' results
// computed in scalar C++, for tests on CPUs without AMX (gemm_amx.h). Compiled for the
// build's own ISA: no AMX or AVX-512 instruction runs here.
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_amx_impl.h"

namespace zaya {
namespace {

// A bf16 as TDPBF16PS reads it: denormals as zero (the instruction's DAZ).
inline float bf16_daz(uint16_t b) {
  if ((b & 0x7F80) == 0) b &= 0x8000;
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// An fp32 result as TDPBF16PS writes it: denormals flushed to zero (its FTZ).
inline float ftz(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
  std::memcpy(&f, &u, 4);
  return f;
}

// Eight tile registers of 16 rows x 64 bytes per thread, configured as the kernel
// configures them (every tile 16 x 64 bytes: config() only checks nothing is left open).
struct EmulatedTiles {
  static constexpr bool kVector = false;
  struct alignas(64) State {
    uint8_t t[8][16][64];
    bool configured = false;
  };
  static State& s() {
    static thread_local State st;
    return st;
  }
  static void config() { s().configured = true; }
  template <int T>
  static void zero() {
    std::memset(s().t[T], 0, sizeof(s().t[T]));
  }
  template <int T>
  static void load(const void* base, long stride) {
    ZAYA_CHECK(s().configured, "emulated tileloadd before ldtilecfg");
    for (int r = 0; r < 16; ++r) std::memcpy(s().t[T][r], static_cast<const uint8_t*>(base) + r * stride, 64);
  }
  template <int T>
  static void store(void* base, long stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, s().t[T][r], 64);
  }
  // TDPBF16PS: C (16 x 16 fp32) += A (16 rows of 16 bf16 pairs) x B (16 rows of pairs, one
  // row per pair index p): C[m][n] += A[m][2p] B[p][2n] + A[m][2p+1] B[p][2n+1], p in order.
  template <int C, int A, int B>
  static void dp() {
    static_assert(C != A && C != B && A != B, "tdpbf16ps needs three distinct tiles");
    State& st = s();
    for (int m = 0; m < 16; ++m) {
      float* c = reinterpret_cast<float*>(st.t[C][m]);
      const uint16_t* a = reinterpret_cast<const uint16_t*>(st.t[A][m]);
      for (int n = 0; n < 16; ++n) {
        float acc = c[n];
        for (int p = 0; p < 16; ++p) {
          const uint16_t* b = reinterpret_cast<const uint16_t*>(st.t[B][p]);
          acc = ftz(acc + bf16_daz(a[2 * p]) * bf16_daz(b[2 * n]));
          acc = ftz(acc + bf16_daz(a[2 * p + 1]) * bf16_daz(b[2 * n + 1]));
        }
        c[n] = acc;
      }
    }
  }
  static void release() { s().configured = false; }
};

}  // namespace

void gemm_amx_bf16_emulated(Trans ta, Trans tb, int M, int N, int K, float alpha, const bf16* A, long lda,
                            const bf16* B, long ldb, float beta, float* C, long ldc) {
  gemm_amx_run<EmulatedTiles>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zaya
