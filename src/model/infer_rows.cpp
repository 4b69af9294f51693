// InferDecoder with its rows at different positions (model/infer.h): rows copied from other
// decoders (contexts of different lengths, each prefilled once) and fed together. Everything
// but attention is position-free (the products, the MoE, the norms) and runs batched as
// usual; RoPE and the cache append take each row's position (cca_qk_norm_rope,
// cca_kv_append), and the attention runs per row over the row's own cache.
#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_quant.h"
#include "model/infer.h"

namespace zaya {

void InferDecoder::copy_row_from(const InferDecoder& src, int src_row, int dst_row) {
  ZAYA_CHECK(&src.m_ == &m_, "copy_row_from: decoders of different models");
  ZAYA_CHECK(src.kv16_ == kv16_, "copy_row_from: decoders with different KV cache types");
  ZAYA_CHECK(src_row >= 0 && src_row < src.batch_, "copy_row_from: row ", src_row, " of a batch of ", src.batch_);
  ZAYA_CHECK(dst_row >= 0 && dst_row < batch_, "copy_row_from: row ", dst_row, " of a batch of ", batch_);
  const int len = src.row_len_[size_t(src_row)];
  ZAYA_CHECK(len <= max_len_, "copy_row_from: ", len, " positions exceed this decoder's ", max_len_);
  const ModelConfig& c = m_.cfg();
  const size_t hd = size_t(c.head_dim), Hk = size_t(c.num_kv_heads), sr = size_t(src_row), dr = size_t(dst_row);
  for (size_t li = 0; li < state_.cca.size(); ++li) {
    const CcaCache<float>& s = src.state_.cca[li];
    CcaCache<float>& d = state_.cca[li];
    const size_t pc = s.p_tail_BPC.size() / size_t(s.B), D = s.x_prev_BD.size() / size_t(s.B);
    std::copy_n(&s.p_tail_BPC[sr * pc], pc, &d.p_tail_BPC[dr * pc]);
    std::copy_n(&s.x_prev_BD[sr * D], D, &d.x_prev_BD[dr * D]);
    for (size_t g = 0; g < Hk; ++g) {  // head-major [B, Hk, capacity, hd]: the first len rows
      const size_t so = (sr * Hk + g) * size_t(src.max_len_) * hd, dof = (dr * Hk + g) * size_t(max_len_) * hd;
      if (kv16_) {
        std::copy_n(&src.kv16c_[li].k[so], size_t(len) * hd, &kv16c_[li].k[dof]);
        std::copy_n(&src.kv16c_[li].v[so], size_t(len) * hd, &kv16c_[li].v[dof]);
      } else {
        std::copy_n(&s.k_BGSd[so], size_t(len) * hd, &d.k_BGSd[dof]);
        std::copy_n(&s.v_BGSd[so], size_t(len) * hd, &d.v_BGSd[dof]);
      }
    }
  }
  row_len_[dr] = len;
  state_.len = *std::max_element(row_len_.begin(), row_len_.end());
  for (auto& cc : state_.cca) cc.len = state_.len;
}

void InferDecoder::copy_rows_from(const InferDecoder& src, int row) {
  for (int b = 0; b < batch_; ++b) copy_row_from(src, row, b);
}

AttnShape InferDecoder::row_shape(int b, int n) const {
  const ModelConfig& c = m_.cfg();
  const int hd = c.head_dim, len = row_len_[size_t(b)];
  AttnShape as{1, n, len + n, len, c.num_q_heads, c.num_kv_heads, hd, c.conv_channels(), hd, hd, c.num_q_heads * hd,
               max_len_};
  as.kv_head_major = true;
  return as;
}

// The attention scratch per thread for each row at its own position (RoPE and the cache
// append take each row's position in attention_core).
void InferDecoder::rows_scratch(int n) {
  size_t need = 0;
  for (int b = 0; b < batch_; ++b) need = std::max(need, row_shape(b, n).scratch_per_thread());
  row_scratch_ = need;
  const size_t all = need * size_t(omp_get_max_threads());
  if (scratch_.size() < all) scratch_.assign(all, 0.f);
}

// Each row's queries over its own cache rows [0, pos(b) + t]. Few rows per sequence (decode,
// a team): the direct kernels, (row, KV head) pairs split over the threads. More (a
// continuation fed as a chunk): the blocked fp32 kernel row by row, as the batched path does.
void InferDecoder::rows_attention(int li, int n) {
  const ModelConfig& c = m_.cfg();
  const int Hq = c.num_q_heads, Hk = c.num_kv_heads, hd = c.head_dim, QD = Hq * hd, C = c.conv_channels();
  const size_t row_kv = size_t(Hk) * max_len_ * hd;  // one row's cache elements
  CcaCache<float>& cache = state_.cca[size_t(li)];
  auto q_of = [&](int b) { return qk_.data() + size_t(b) * n * C; };
  auto out_of = [&](int b) { return attn_.data() + size_t(b) * n * QD; };
  auto lse_of = [&](int b) { return lse_.data() + size_t(b) * Hq * n; };
  if (team_ || n <= kDirectAttnRows) {
    auto pair = [&](int bg) {
      const int b = bg / Hk, g = bg % Hk;
      const AttnShape s = row_shape(b, n);
      float* sc = scratch_.data() + size_t(omp_get_thread_num()) * row_scratch_;
      if (kv16_)
        attention_group_kv_bf16(out_of(b), lse_of(b), q_of(b), kv16c_[size_t(li)].k.data() + b * row_kv,
                                kv16c_[size_t(li)].v.data() + b * row_kv, s, 0, g, sc);
      else
        attention_forward_group(out_of(b), lse_of(b), q_of(b), cache.k_BGSd.data() + b * row_kv,
                                cache.v_BGSd.data() + b * row_kv, s, 0, g, sc);
    };
    const int pairs = batch_ * Hk;
    if (team_) {  // inside the decode region: split over the team, then meet
#pragma omp for schedule(static) nowait
      for (int i = 0; i < pairs; ++i) pair(i);
      barrier();
    } else {
#pragma omp parallel for schedule(static)
      for (int i = 0; i < pairs; ++i) pair(i);
    }
    return;
  }
  for (int b = 0; b < batch_; ++b) {
    AttnShape s = row_shape(b, n);
    if (kv16_) {  // this row's cached entries widened to fp32
      kvw_.resize(2 * size_t(Hk) * s.Tk * hd);
      float* kw = kvw_.data();
      float* vw = kw + size_t(Hk) * s.Tk * hd;
      widen_kv_bf16(kw, kv16c_[size_t(li)].k.data() + b * row_kv, 1, Hk, max_len_, s.Tk, hd);
      widen_kv_bf16(vw, kv16c_[size_t(li)].v.data() + b * row_kv, 1, Hk, max_len_, s.Tk, hd);
      s.kv_batch_rows = s.Tk;
      attention_forward(out_of(b), lse_of(b), q_of(b), kw, vw, s, scratch_.data());
    } else {
      attention_forward(out_of(b), lse_of(b), q_of(b), cache.k_BGSd.data() + b * row_kv,
                        cache.v_BGSd.data() + b * row_kv, s, scratch_.data());
    }
  }
}

}  // namespace zaya
