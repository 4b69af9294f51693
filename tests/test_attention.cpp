// Training attention (causal row blocks, kernels/attention.h) against direct sums in double:
// softmax(scale q k^T) v and its three gradients written out per row, no blocks. Shapes past
// 256 keys take the long row blocks (attn_row_block), with a short last block and with a
// context-parallel shard's offset; the finite-difference rows in test_gradcheck.cpp stay at
// short shapes, where the 64-row blocks run. In fp32 every path the CPU has is checked: the
// per-block products, the AVX2 tiles and the AVX-512 tiles (kernels/attention_tiles.h).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/attention_tiles.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm.h"  // cpu_features

using namespace zaya;

namespace {

struct Grads {
  std::vector<double> out, lse, dq, dk, dv;
};

// Direct sums over the shape's layout (ld* strides, side-by-side KV heads).
Grads direct(const AttnShape& s, const std::vector<double>& q, const std::vector<double>& k,
             const std::vector<double>& v, const std::vector<double>& dout) {
  const int G = s.Hq / s.Hk, hd = s.hd;
  const double scale = 1 / std::sqrt(double(hd));
  Grads r{std::vector<double>(dout.size()), std::vector<double>(size_t(s.B) * s.Hq * s.Tq),
          std::vector<double>(q.size()), std::vector<double>(k.size()), std::vector<double>(v.size())};
  std::vector<double> p(s.Tk), dp(s.Tk);
  for (int b = 0; b < s.B; ++b)
    for (int j = 0; j < s.Hq; ++j) {
      const size_t kv0 = s.kv_offset(b, j / G, s.ldk);
      for (int t = 0; t < s.Tq; ++t) {
        const double* qr = &q[(size_t(b) * s.Tq + t) * s.ldq + size_t(j) * hd];
        const double* go = &dout[(size_t(b) * s.Tq + t) * s.ldo + size_t(j) * hd];
        double* o = &r.out[(size_t(b) * s.Tq + t) * s.ldo + size_t(j) * hd];
        const int n = std::min(s.Tk, s.q_pos0 + t + 1);
        double m = -INFINITY, sum = 0;
        for (int u = 0; u < n; ++u) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += qr[i] * k[kv0 + size_t(u) * s.ldk + i];
          m = std::max(m, p[size_t(u)] = scale * d);
        }
        for (int u = 0; u < n; ++u) sum += (p[size_t(u)] = std::exp(p[size_t(u)] - m));
        r.lse[(size_t(b) * s.Hq + j) * s.Tq + t] = m + std::log(sum);
        double D = 0;
        for (int u = 0; u < n; ++u) {
          p[size_t(u)] /= sum;
          for (int i = 0; i < hd; ++i) o[i] += p[size_t(u)] * v[kv0 + size_t(u) * s.ldv + i];
        }
        for (int i = 0; i < hd; ++i) D += go[i] * o[i];
        for (int u = 0; u < n; ++u) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += go[i] * v[kv0 + size_t(u) * s.ldv + i];
          const double ds = p[size_t(u)] * (d - D);
          for (int i = 0; i < hd; ++i) {
            r.dv[kv0 + size_t(u) * s.ldv + i] += p[size_t(u)] * go[i];
            r.dq[(size_t(b) * s.Tq + t) * s.ldq + size_t(j) * hd + i] += scale * ds * k[kv0 + size_t(u) * s.ldk + i];
            r.dk[kv0 + size_t(u) * s.ldk + i] += scale * ds * qr[i];
          }
        }
      }
    }
  return r;
}

template <class T>
Grads blocked(const AttnShape& s, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& dout) {
  auto cast = [](const std::vector<double>& x) { return std::vector<T>(x.begin(), x.end()); };
  const auto qt = cast(q), kt = cast(k), vt = cast(v), dt = cast(dout);
  std::vector<T> out(dout.size()), lse(size_t(s.B) * s.Hq * s.Tq), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<T> scratch(s.scratch_elems(omp_get_max_threads()));
  attention_forward(out.data(), lse.data(), qt.data(), kt.data(), vt.data(), s, scratch.data());
  attention_backward(dq.data(), dk.data(), dv.data(), dt.data(), out.data(), lse.data(), qt.data(), kt.data(),
                     vt.data(), s, scratch.data());
  auto back = [](const std::vector<T>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {back(out), back(lse), back(dq), back(dk), back(dv)};
}

double normwise(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

TEST(Attention, LongCausalBlocksMatchDirectSums) {
  struct Case {
    int Tq, Tk, q_pos0;
  };
  // 300 local positions: blocks of 128, 128 and 44; a shard's 150 queries from position 200
  // against 350 gathered keys.
  for (const Case c : {Case{300, 300, 0}, Case{150, 350, 200}}) {
    const int B = 2, Hq = 4, Hk = 2, hd = 16;
    AttnShape s{B, c.Tq, c.Tk, c.q_pos0, Hq, Hk, hd, Hq * hd + 8, Hk * hd, Hk * hd, Hq * hd};
    ASSERT_EQ(attn_row_block(s), kAttnRowBlockLong);
    Philox r(uint64_t(c.Tq), 9);
    auto draw = [&](size_t n, double sd) {
      std::vector<double> x(n);
      for (auto& e : x) e = sd * r.normal();
      return x;
    };
    const auto q = draw(size_t(B) * c.Tq * s.ldq, 2), k = draw(size_t(B) * c.Tk * s.ldk, 1);
    const auto v = draw(size_t(B) * c.Tk * s.ldv, 1), dout = draw(size_t(B) * c.Tq * s.ldo, 1);
    const Grads want = direct(s, q, k, v, dout), dbl = blocked<double>(s, q, k, v, dout),
                flt = blocked<float>(s, q, k, v, dout);
    const std::vector<std::pair<const char*, std::vector<double> Grads::*>> parts{
        {"out", &Grads::out}, {"lse", &Grads::lse}, {"dq", &Grads::dq}, {"dk", &Grads::dk}, {"dv", &Grads::dv}};
    for (const auto& [name, m] : parts) {
      EXPECT_LT(normwise(dbl.*m, want.*m), 1e-12) << name << " double, Tq " << c.Tq;
      EXPECT_LT(normwise(flt.*m, want.*m), 2e-5) << name << " float, Tq " << c.Tq;
    }
  }
}

// The fp32 AVX2 tiles (causal skipping per 6-row tile, 16- and 8-column panels, products over
// operands in place) and the per-block BLAS products, each against the direct sums: row counts
// that leave partial tiles and blocks, head dims 64 and 24 (two panels of 16 and 8), a shard's
// offset, and a head-major cache of spare capacity (prefill into a KV cache).
TEST(Attention, Fp32TilesAndBlasBlocksMatchDirectSums) {
  struct Case {
    int B, Tq, Tk, q_pos0, Hq, Hk, hd;
    bool head_major;
  };
  const Case cases[] = {{2, 70, 70, 0, 4, 2, 64, false},
                        {1, 300, 300, 0, 2, 1, 24, false},
                        {2, 37, 101, 64, 4, 1, 16, false},
                        {2, 13, 13, 0, 4, 2, 32, true},
                        {3, 149, 149, 0, 2, 2, 16, false}};
  // Auto: the AVX-512 tiles where the CPU has AVX-512F and hd % 16 == 0 (AVX2 tiles on a CPU
  // with AVX2 alone); Avx2: the AVX2 tiles; Portable: the per-block products.
  for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
    attention_tiles_force(tier);
    for (const Case& c : cases) {
      // K and V padded alike (direct() places both at K's offsets).
      AttnShape s{c.B, c.Tq, c.Tk, c.q_pos0, c.Hq, c.Hk, c.hd, c.Hq * c.hd + 8, c.Hk * c.hd + 8, c.Hk * c.hd + 8,
                  c.Hq * c.hd};
      size_t kv_rows = size_t(c.B) * c.Tk;
      if (c.head_major) {
        s.kv_head_major = true, s.kv_batch_rows = c.Tk + 5, s.ldk = s.ldv = c.hd;
        kv_rows = size_t(c.B) * c.Hk * s.kv_batch_rows;
      }
      const bool avx512 = cpu_features().avx512f && c.hd % 16 == 0;
      const bool avx2 = cpu_avx2_fma() && c.hd % 8 == 0 && (tier == KernelTier::Avx2 || !cpu_features().avx512f);
      const char* want_path = tier == KernelTier::Auto && avx512 ? "AVX-512 8x32 tiles"
                              : tier != KernelTier::Portable && avx2 ? "AVX2 6x16 tiles"
                                                                     : nullptr;
      const char* path = attention_tiles_name(s);
      ASSERT_STREQ(path, want_path) << "hd " << c.hd;
      Philox r(uint64_t(c.Tq * 7 + c.hd), 4);
      auto draw = [&](size_t n, double sd) {
        std::vector<double> x(n);
        for (auto& e : x) e = sd * r.normal();
        return x;
      };
      const auto q = draw(size_t(c.B) * c.Tq * s.ldq, 2), k = draw(kv_rows * s.ldk, 1);
      const auto v = draw(kv_rows * s.ldv, 1), dout = draw(size_t(c.B) * c.Tq * s.ldo, 1);
      const Grads want = direct(s, q, k, v, dout), got = blocked<float>(s, q, k, v, dout);
      const std::vector<std::pair<const char*, std::vector<double> Grads::*>> parts{
          {"out", &Grads::out}, {"lse", &Grads::lse}, {"dq", &Grads::dq}, {"dk", &Grads::dk}, {"dv", &Grads::dv}};
      for (const auto& [name, m] : parts)
        EXPECT_LT(normwise(got.*m, want.*m), 2e-5)
            << name << ", " << (path ? path : "per-block products") << ", Tq " << c.Tq << " hd " << c.hd;
    }
  }
  attention_tiles_force(KernelTier::Auto);
}
