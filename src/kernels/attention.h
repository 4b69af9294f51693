// Causal GQA softmax attention (spec section 3, step 7), fp32 softmax, scale 1/sqrt(hd).
// Memory-aware: forward keeps only the row log-sum-exp (lse); backward recomputes the
// probabilities per head (as FlashAttention does), so no [T, T] tensor is stored per layer.
//
// Sequence-shard seam (context parallel): queries are Tq positions starting at q_pos0;
// keys/values are Tk positions starting at 0 (a gathered K/V); query at position q may
// attend keys s <= q. The local case is Tq == Tk, q_pos0 == 0.
// Layout: q rows [B*Tq] of Hq heads, k and v rows [B*Tk] of Hk heads, out rows [B*Tq] of Hq
// heads, each with its own row stride (ld*); lse [B, Hq, Tq]. dq/dk/dv/dout share the
// strides of q/k/v/out.
//
// Threads: training and prefill split their (batch, head) tasks over the threads in contiguous
// ranges (schedule(static)), so that two threads rarely work on the same batch rows at once. In
// turn (schedule(dynamic)) they took (b, g) and (b, g + 1) together and wrote neighbouring
// columns of the same dQ / dK / dV / O rows. zaya1-small's layer on the 2-core Zen 5 VM
// (`bench_gemm_bf16 --attention`, 2 threads, 4 alternated rounds), backward fp32 / bf16:
//   - buffers at 16 mod 64 (a line straddling each pair of heads): in turn 3.49-3.54 / 2.84-2.92
//     ms, in ranges 2.69-2.77 / 2.12-2.14 (in turn by whole batch rows: 3.12-3.16 / 2.53-2.55);
//   - buffers on 64-byte lines (core/aligned_new.cpp; the heads' columns in lines of their
//     own): in turn 2.68-2.79 / 1.99-2.07 ms, in ranges 2.39-2.52 / 1.76-1.86. What still
//     costs there is not established (one candidate: the adjacent-line prefetch fetching the
//     line the other thread writes).
#pragma once
#include <algorithm>
#include <cstddef>

namespace zaya {

struct AttnShape {
  int B, Tq, Tk, q_pos0, Hq, Hk, hd;
  int ldq, ldk, ldv, ldo;
  int kv_batch_rows = 0;  // rows between batches in k/v (a KV cache's capacity); 0 = Tk
  // K/V head layout. By default the Hk heads of a position sit side by side in one k/v row
  // (head g at column g*hd, rows ldk apart). A KV cache is head-major instead,
  // [B, Hk, kv_batch_rows, hd] with ldk = ldv = hd: the rows decode reads for one head are
  // one contiguous stream, not 512 B pieces at the stride of all heads.
  bool kv_head_major = false;
  // Offset of (batch row b, KV head g)'s first row in k (ld = ldk) or v (ld = ldv).
  size_t kv_offset(int b, int g, int ld) const {
    const size_t rows = size_t(kv_batch_rows ? kv_batch_rows : Tk);
    return kv_head_major ? (size_t(b) * Hk + size_t(g)) * rows * size_t(ld)
                         : size_t(b) * rows * size_t(ld) + size_t(g) * size_t(hd);
  }
  // Scratch elements needed by attention_forward/backward for `threads` threads.
  size_t scratch_elems(int threads) const { return size_t(threads) * scratch_per_thread(); }
  size_t scratch_per_thread() const { return size_t(std::max(2 * Tq, Hq / std::max(Hk, 1))) * Tk; }
};

template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttnShape& s, T* scratch);
// One (batch row b, KV head g) of attention_forward, its G = Hq/Hk query heads together, by
// direct dot products: for a few query rows (decode) two BLAS calls per head would cost more
// in packing than in math, and the cached K and V rows are read once for the G heads (not G
// times). scratch: G * Tk elements. attention_forward uses it when Tq <= kDirectAttnRows;
// decode splits the (b, g) pairs over its team.
constexpr int kDirectAttnRows = 4;
// Causal row blocks (the BLAS and AMX paths): query rows in blocks of attn_row_block(s), each
// block's products stopping at the last key one of its rows sees, keys [0, attn_block_keys).
// Smaller blocks skip more of the masked triangle, larger ones make fewer, longer products:
// 64 rows up to 256 keys, 128 beyond. One layer, 2 threads, AMD Zen 5
// (`bench_gemm_bf16 --attention-shape`, interleaved): at T = 256, 128-row blocks ran 2-5%
// slower; at T = 512 backward 3-5% faster (fp32 and bf16); at T = 1024 backward 7% (fp32) and
// 9% (bf16) faster, forward within 3%; 256-row blocks at T = 1024 5% slower than 128.
constexpr int kAttnRowBlock = 64, kAttnRowBlockLong = 128;
inline int attn_row_block(const AttnShape& s) { return s.Tk > 256 ? kAttnRowBlockLong : kAttnRowBlock; }
inline int attn_block_keys(const AttnShape& s, int t0, int rows) { return std::min(s.Tk, s.q_pos0 + t0 + rows); }
// D[i] = rowdot(dO_i, O_i) for `rows` rows of one head (row stride ld), the backward's softmax
// term, in a loop of its own: O's rows come from L3 (a layer's O is 2 MB at zaya1-small), and
// their loads overlap there, not when each waits between one row's exponentials and the next's
// (the AVX-512 tiles' backward ran 1.14x faster on zaya1-small's layer for it).
template <class T>
inline void attention_rowdots(T* D, const T* o, const T* dout, int rows, int hd, int ld) {
  for (int i = 0; i < rows; ++i) {
    const T* oi = o + size_t(i) * ld;
    const T* gi = dout + size_t(i) * ld;
    T Dt = 0;
#pragma omp simd reduction(+ : Dt)  // lanes, not a scalar chain of hd dependent adds
    for (int d = 0; d < hd; ++d) Dt += oi[d] * gi[d];
    D[i] = Dt;
  }
}
template <class T>
void attention_forward_group(T* out, T* lse, const T* q, const T* k, const T* v, const AttnShape& s, int b, int g,
                             T* scratch);
// Accumulates into dq, dk, dv.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse, const T* q, const T* k,
                        const T* v, const AttnShape& s, T* scratch);

}  // namespace zaya
