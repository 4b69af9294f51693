// Decode attention (few query rows over a KV cache): every tier of the float path (AVX-512,
// AVX2, portable; a tier the CPU lacks runs the next) against the same attention in double
// precision, for shapes with a masked tail (Tk not a multiple of 16 or 8), G = 1..5 query
// heads per KV head, hd 16..128 and batch rows with their own caches; and the KV cache's
// head-major layout against the side-by-side one; the bf16 cache's kernels (every tier)
// against double attention over the same cache widened.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/attention_group.h"
#include "kernels/attention_quant.h"

using namespace zaya;

namespace {

template <class T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

struct Case {
  int B, Tq, Tk, Hq, Hk, hd;
};

void check(const Case& c, KernelTier tier) {
  const int KD = c.Hk * c.hd, QD = c.Hq * c.hd, ldq = QD + KD + 8;  // q inside a wider packed row
  const int cap = c.Tk + 5;                                           // cache capacity > length
  AttnShape s{c.B, c.Tq, c.Tk, c.Tk - c.Tq, c.Hq, c.Hk, c.hd, ldq, KD, KD, QD, cap};
  Philox r(uint64_t(c.Tk * 131 + c.hd * 7 + c.Hq), 5);
  std::vector<double> q(size_t(c.B) * c.Tq * ldq), k(size_t(c.B) * cap * KD), v(k.size());
  for (auto& x : q) x = 2 * r.normal();  // sharp enough softmax rows
  for (auto& x : k) x = r.normal();
  for (auto& x : v) x = r.normal();
  std::vector<double> od(size_t(c.B) * c.Tq * QD), ld(size_t(c.B) * c.Hq * c.Tq), sd(s.scratch_elems(64));
  attention_forward(od.data(), ld.data(), q.data(), k.data(), v.data(), s, sd.data());
  auto qf = cast<float>(q), kf = cast<float>(k), vf = cast<float>(v);
  std::vector<float> of(od.size()), lf(ld.size()), sf(s.scratch_elems(64));
  attention_group_force(tier);
  attention_forward(of.data(), lf.data(), qf.data(), kf.data(), vf.data(), s, sf.data());
  const char* path = attention_group_kernel(s, false);
  attention_group_force(KernelTier::Auto);
  for (size_t i = 0; i < od.size(); ++i)
    ASSERT_NEAR(of[i], od[i], 2e-5 * (1 + std::fabs(od[i]))) << path << " out " << i << " hd " << c.hd << " Tk " << c.Tk;
  for (size_t i = 0; i < ld.size(); ++i)
    ASSERT_NEAR(lf[i], ld[i], 2e-5 * (1 + std::fabs(ld[i]))) << path << " lse " << i << " hd " << c.hd;
  // The same K/V in a KV cache's head-major layout [B, Hk, cap, hd]: the very same sums.
  std::vector<float> kh(kf.size()), vh(vf.size()), oh(of.size()), lh(lf.size());
  for (int b = 0; b < c.B; ++b)
    for (int g = 0; g < c.Hk; ++g)
      for (int u = 0; u < cap; ++u)
        for (int i = 0; i < c.hd; ++i) {
          const size_t from = (size_t(b) * cap + u) * KD + size_t(g) * c.hd + i;
          const size_t to = ((size_t(b) * c.Hk + g) * cap + u) * c.hd + i;
          kh[to] = kf[from];
          vh[to] = vf[from];
        }
  AttnShape sh = s;
  sh.ldk = sh.ldv = c.hd;
  sh.kv_head_major = true;
  attention_group_force(tier);
  attention_forward(oh.data(), lh.data(), qf.data(), kh.data(), vh.data(), sh, sf.data());
  attention_group_force(KernelTier::Auto);
  EXPECT_EQ(oh, of) << path << " head-major, hd " << c.hd << " Tq " << c.Tq;
  EXPECT_EQ(lh, lf) << path << " head-major lse, hd " << c.hd;
}

}  // namespace

TEST(AttentionDecode, FloatPathsMatchDouble) {
  const Case cases[] = {
      {1, 1, 1, 4, 1, 16},    {1, 1, 37, 8, 2, 32},  {2, 1, 53, 8, 2, 128}, {2, 3, 40, 10, 2, 80},
      {1, 4, 16, 3, 3, 48},   {3, 2, 129, 5, 1, 64}, {1, 1, 33, 2, 2, 24},  // hd 24: never AVX-512
      {2, 6, 40, 8, 2, 32},  // 6 query rows: the BLAS path (prefill over a cache)
  };
  for (const Case& c : cases)
    for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) check(c, tier);
}

// A bf16 head-major cache: attention_group_kv_bf16 on each of its paths against double
// attention over the cache's values widened (bf16 to float is exact, so only the sums' order
// differs).
TEST(AttentionDecode, Bf16CacheMatchesDoubleOverWidened) {
  const Case cases[] = {{1, 1, 1, 4, 1, 16}, {1, 1, 37, 8, 2, 32}, {2, 1, 53, 8, 2, 128},
                        {2, 3, 40, 10, 2, 80}, {3, 2, 129, 5, 1, 64}, {1, 1, 33, 2, 2, 24}};
  for (const Case& c : cases) {
    const int QD = c.Hq * c.hd, ldq = QD + 8, cap = c.Tk + 5;
    AttnShape s{c.B, c.Tq, c.Tk, c.Tk - c.Tq, c.Hq, c.Hk, c.hd, ldq, c.hd, c.hd, QD, cap};
    s.kv_head_major = true;
    Philox r(uint64_t(c.Tk * 17 + c.hd), 9);
    std::vector<float> q(size_t(c.B) * c.Tq * ldq);
    for (auto& x : q) x = float(2 * r.normal());
    std::vector<bf16> k(size_t(c.B) * c.Hk * cap * c.hd), v(k.size());
    for (auto& x : k) x = to_bf16(float(r.normal()));
    for (auto& x : v) x = to_bf16(float(r.normal()));
    std::vector<double> qd(q.begin(), q.end()), kd(k.size()), vd(v.size());
    for (size_t i = 0; i < k.size(); ++i) kd[i] = from_bf16(k[i]), vd[i] = from_bf16(v[i]);
    std::vector<double> od(size_t(c.B) * c.Tq * QD), ld(size_t(c.B) * c.Hq * c.Tq), sd(s.scratch_elems(64));
    attention_forward(od.data(), ld.data(), qd.data(), kd.data(), vd.data(), s, sd.data());
    for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
      attention_group_force(tier);
      const char* path = attention_group_kernel(s, true);
      std::vector<float> o(od.size(), NAN), l(ld.size(), NAN), sc(s.scratch_per_thread());
      for (int b = 0; b < c.B; ++b)
        for (int g = 0; g < c.Hk; ++g) attention_group_kv_bf16(o.data(), l.data(), q.data(), k.data(), v.data(), s, b, g, sc.data());
      attention_group_force(KernelTier::Auto);
      for (size_t i = 0; i < od.size(); ++i)
        ASSERT_NEAR(o[i], od[i], 2e-5 * (1 + std::fabs(od[i]))) << path << " out " << i << " hd " << c.hd << " Tk " << c.Tk;
      for (size_t i = 0; i < ld.size(); ++i)
        ASSERT_NEAR(l[i], ld[i], 2e-5 * (1 + std::fabs(ld[i]))) << path << " lse " << i << " hd " << c.hd;
    }
  }
}
