#include "quant/blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <strings.h>

#include "core/bf16.h"

namespace zaya::quant {

namespace {

struct Info {
  QType t;
  const char* name;
  int block, bytes;
};
constexpr Info kInfo[] = {{QType::F32, "f32", 1, 4},         {QType::F16, "f16", 1, 2},
                          {QType::Q4_0, "q4_0", kQK, 18},    {QType::Q8_0, "q8_0", kQK, 34},
                          {QType::Q4_K, "q4_k", kQKK, 144},  {QType::Q6_K, "q6_k", kQKK, 210},
                          {QType::BF16, "bf16", 1, 2}};

const Info* info(uint32_t id) {
  for (const Info& i : kInfo)
    if (uint32_t(i.t) == id) return &i;
  return nullptr;
}

int nearest(float v) { return int(std::nearbyint(v)); }

// --- q8_0 / q4_0: one fp16 scale per 32 weights.
void quantize_q8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::clamp(nearest(x[j] * id), -127, 127));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0, max = 0;  // max: the value of largest magnitude, with its sign
    for (int j = 0; j < kQK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -8.f, id = d ? 1.f / d : 0.f;
    b[i].d = fp32_to_fp16(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = uint8_t(std::clamp(int(x[j] * id + 8.5f), 0, 15));
    for (int j = 0; j < kQK / 2; ++j) b[i].qs[j] = uint8_t(q[j] | (q[j + kQK / 2] << 4));
  }
}

// --- q4_k. For a sub-block of n weights, the scale s >= 0 and min m >= 0 of w = s*q - m
// (q in 0..15) minimising sum_i wt_i (s q_i - m - x_i)^2: the plain range, then levels from
// a few scales around (max - min) / 15, each followed by the weighted least-squares s and m
// for its levels; the best kept. (Six candidates: ZAYA1-base quantizes in minutes.)
float fit_scale_min(const float* x, const float* wt, int n, int nmax, uint8_t* L, float* the_min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  lo = std::min(lo, 0.f);
  if (hi <= lo) {
    std::fill(L, L + n, uint8_t(0));
    *the_min = -lo;
    return 0.f;
  }
  const auto error = [&](float s, float m) {
    const float is = 1.f / s;
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float l = std::clamp(std::nearbyint((x[i] - m) * is), 0.f, float(nmax));
      const float e = s * l + m - x[i];
      err += wt[i] * e * e;
    }
    return err;
  };
  float best_s = (hi - lo) / nmax, best_m = lo, best_err = error(best_s, best_m);
  for (int step = 0; step < 5; ++step) {
    const float is = (nmax - 0.5f + 0.25f * step) / (hi - lo);
    float sw = 0, sl = 0, sl2 = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      const float l = std::min(std::nearbyint(is * (x[i] - lo)), float(nmax));
      sw += wt[i], sl += wt[i] * l, sl2 += wt[i] * l * l, sx += wt[i] * x[i], slx += wt[i] * l * x[i];
    }
    const float det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    float s = (sw * slx - sx * sl) / det, m = (sl2 * sx - sl * slx) / det;
    if (m > 0) m = 0, s = sl2 > 0 ? slx / sl2 : 0.f;  // the min is at most 0
    if (!(s > 0)) continue;
    const float err = error(s, m);
    if (err < best_err) best_err = err, best_s = s, best_m = m;
  }
  const float is = 1.f / best_s;
  for (int i = 0; i < n; ++i) L[i] = uint8_t(std::clamp(nearest((x[i] - best_m) * is), 0, nmax));
  *the_min = -best_m;
  return best_s;
}

void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float sum2 = 0;
    for (int j = 0; j < kQKK; ++j) sum2 += x[j] * x[j];
    const float av = std::sqrt(sum2 / kQKK);
    float wt[kQKK], scale[8], mins[8];
    for (int j = 0; j < kQKK; ++j) wt[j] = av + std::fabs(x[j]);  // weight the large values
    uint8_t L[kQKK];
    float max_s = 0, max_m = 0;
    for (int j = 0; j < 8; ++j) {
      scale[j] = fit_scale_min(x + 32 * j, wt + 32 * j, 32, 15, L + 32 * j, &mins[j]);
      max_s = std::max(max_s, scale[j]);
      max_m = std::max(max_m, mins[j]);
    }
    const float is = max_s > 0 ? 63.f / max_s : 0.f, im = max_m > 0 ? 63.f / max_m : 0.f;
    std::memset(b[i].scales, 0, 12);
    for (int j = 0; j < 8; ++j) {
      const uint8_t ls = uint8_t(std::min(63, nearest(is * scale[j]))), lm = uint8_t(std::min(63, nearest(im * mins[j])));
      if (j < 4) {
        b[i].scales[j] = ls;
        b[i].scales[j + 4] = lm;
      } else {
        b[i].scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
        b[i].scales[j - 4] |= uint8_t((ls >> 4) << 6);
        b[i].scales[j] |= uint8_t((lm >> 4) << 6);
      }
    }
    b[i].d = fp32_to_fp16(max_s / 63.f);
    b[i].dmin = fp32_to_fp16(max_m / 63.f);
    // The levels again against the scales as stored (6-bit, times the fp16 super scales).
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      q4k_scale_min(j, b[i].scales, &sc, &m);
      const float ds = d * sc, dm = dmin * m;
      for (int k = 0; k < 32; ++k)
        L[32 * j + k] = ds ? uint8_t(std::clamp(nearest((x[32 * j + k] + dm) / ds), 0, 15)) : 0;
    }
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) b[i].qs[32 * c + l] = uint8_t(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

// --- q6_k: 16 sub-blocks of 16, each an 8-bit scale of the fp16 d; levels -32..31.
void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float scale[16], max_abs_s = 0, max_s = 0;
    for (int s = 0; s < 16; ++s) {
      const float* xs = x + 16 * s;
      float amax = 0, max = 0;
      for (int k = 0; k < 16; ++k)
        if (std::fabs(xs[k]) > amax) amax = std::fabs(xs[k]), max = xs[k];
      // The largest magnitude maps to -32 (the one level without a positive twin); a few
      // nearby scales are tried and the one with the least squared error kept.
      float best = max / -32.f, best_err = INFINITY;
      for (int c = 0; c < 5 && max != 0; ++c) {
        const float sc = max / -(32.f - 0.5f * c), isc = 1.f / sc;
        float err = 0;
        for (int k = 0; k < 16; ++k) {
          const float e = sc * std::clamp(std::nearbyint(xs[k] * isc), -32.f, 31.f) - xs[k];
          err += e * e;
        }
        if (err < best_err) best_err = err, best = sc;
      }
      scale[s] = best;
      if (std::fabs(best) > max_abs_s) max_abs_s = std::fabs(best), max_s = best;
    }
    uint8_t L[kQKK];
    if (max_abs_s == 0) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      std::fill(L, L + kQKK, uint8_t(32));
    } else {
      const float is = -128.f / max_s;
      b[i].d = fp32_to_fp16(1.f / is);
      const float d = fp16_to_fp32(b[i].d);
      for (int s = 0; s < 16; ++s) {
        b[i].scales[s] = int8_t(std::clamp(nearest(is * scale[s]), -128, 127));
        const float ds = d * b[i].scales[s];
        for (int k = 0; k < 16; ++k)
          L[16 * s + k] = uint8_t(ds ? std::clamp(nearest(x[16 * s + k] / ds), -32, 31) + 32 : 32);
      }
    }
    for (int n = 0; n < 2; ++n) {
      const uint8_t* q = L + 128 * n;
      uint8_t* ql = b[i].ql + 64 * n;
      uint8_t* qh = b[i].qh + 32 * n;
      for (int l = 0; l < 32; ++l) {
        ql[l] = uint8_t((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
        ql[l + 32] = uint8_t((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
        qh[l] = uint8_t((q[l] >> 4) | ((q[l + 32] >> 4) << 2) | ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

const char* qtype_name(uint32_t id) {
  const Info* i = info(id);
  return i ? i->name : nullptr;
}
bool qtype_known(uint32_t id) { return info(id) != nullptr; }
int qtype_block(QType t) { return info(uint32_t(t))->block; }
int qtype_block_bytes(QType t) { return info(uint32_t(t))->bytes; }
bool qtype_is_quantized(QType t) { return qtype_block(t) > 1; }

bool qtype_parse(const char* s, QType* out) {
  for (const Info& i : kInfo)
    if (!strcasecmp(s, i.name)) return *out = i.t, true;
  return false;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: inf
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24 (exact scaling)
    float m;
    std::memcpy(&m, &a, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(m * 16777216.f)));
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // round to nearest even
  return uint16_t(sign | ((r - 0x38000000u) >> 13));
}

float fp16_to_fp32(uint16_t h) { return from_fp16(h); }

void quantize_row(QType t, const float* x, void* dst, int64_t K) {
  const int64_t nb = K / qtype_block(t);
  switch (t) {
    case QType::Q8_0: return quantize_q8_0(x, static_cast<BlockQ8_0*>(dst), nb);
    case QType::Q4_0: return quantize_q4_0(x, static_cast<BlockQ4_0*>(dst), nb);
    case QType::Q4_K: return quantize_q4_k(x, static_cast<BlockQ4_K*>(dst), nb);
    case QType::Q6_K: return quantize_q6_k(x, static_cast<BlockQ6_K*>(dst), nb);
    case QType::BF16:
      for (int64_t i = 0; i < K; ++i) static_cast<bf16*>(dst)[i] = to_bf16(x[i]);
      return;
    case QType::F16:
      for (int64_t i = 0; i < K; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(x[i]);
      return;
    case QType::F32: std::memcpy(dst, x, size_t(K) * 4); return;
  }
}

void dequantize_row(QType t, const void* src, float* y, int64_t K) {
  const int64_t nb = K / qtype_block(t);
  switch (t) {
    case QType::Q8_0: {
      const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = from_fp16(b[i].d);
        for (int j = 0; j < kQK; ++j) y[i * kQK + j] = d * b[i].qs[j];
      }
      return;
    }
    case QType::Q4_0: {
      const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = from_fp16(b[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
          y[i * kQK + j] = d * ((b[i].qs[j] & 0xF) - 8);
          y[i * kQK + j + kQK / 2] = d * ((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case QType::Q4_K: {
      const BlockQ4_K* b = static_cast<const BlockQ4_K*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = from_fp16(b[i].d), dmin = from_fp16(b[i].dmin);
        float* o = y + i * kQKK;
        for (int c = 0; c < 4; ++c) {
          uint8_t s0, m0, s1, m1;
          q4k_scale_min(2 * c, b[i].scales, &s0, &m0);
          q4k_scale_min(2 * c + 1, b[i].scales, &s1, &m1);
          const uint8_t* q = b[i].qs + 32 * c;
          for (int l = 0; l < 32; ++l) {
            o[64 * c + l] = d * s0 * (q[l] & 0xF) - dmin * m0;
            o[64 * c + 32 + l] = d * s1 * (q[l] >> 4) - dmin * m1;
          }
        }
      }
      return;
    }
    case QType::Q6_K: {
      const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = from_fp16(b[i].d);
        for (int n = 0; n < 2; ++n) {
          const uint8_t* ql = b[i].ql + 64 * n;
          const uint8_t* qh = b[i].qh + 32 * n;
          const int8_t* sc = b[i].scales + 8 * n;
          float* o = y + i * kQKK + 128 * n;
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            o[l] = d * sc[is] * (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
            o[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          }
        }
      }
      return;
    }
    case QType::BF16:
      for (int64_t i = 0; i < K; ++i) {
        bf16 h;
        std::memcpy(&h, static_cast<const uint8_t*>(src) + 2 * i, 2);
        y[i] = from_bf16(h);
      }
      return;
    case QType::F16:
      for (int64_t i = 0; i < K; ++i) {
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(src) + 2 * i, 2);
        y[i] = from_fp16(h);
      }
      return;
    case QType::F32: std::memcpy(y, src, size_t(K) * 4); return;
  }
}

int64_t first_bad_scale(QType t, const void* row, int64_t K) {
  const auto bad = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return (h & 0x7c00u) == 0x7c00u;  // exponent all ones: inf or NaN
  };
  const uint8_t* p = static_cast<const uint8_t*>(row);
  const int64_t nb = K / qtype_block(t), bb = qtype_block_bytes(t);
  for (int64_t i = 0; i < nb; ++i, p += bb) {
    switch (t) {
      case QType::Q8_0:
      case QType::Q4_0:
        if (bad(p)) return i;
        break;
      case QType::Q4_K:
        if (bad(p) || bad(p + 2)) return i;
        break;
      case QType::Q6_K:
        if (bad(p + 208)) return i;
        break;
      default: return -1;
    }
  }
  return -1;
}

}  // namespace zaya::quant
