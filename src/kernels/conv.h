// CCA's causal two-stage convolution over time (spec section 3, step 2), per batch row:
//   pad p [T, C] on the left with P = (K0-1)+(K1-1) zero steps,
//   y0 = depthwise conv (K0 taps, bias) -> T+K1-1 steps (the first ones see padding only),
//   c  = grouped conv (one group per head of hd channels, full hd x hd mix per tap, bias) -> T steps.
// y0 and the output use a "tall" layout of B*(T+K1-1) rows so that each (group, tap) is ONE
// GEMM over all batch rows; output row b*(T+K1-1)+t is c[b, t], the last K1-1 rows of each
// batch block are junk (zeroed). Backward ACCUMULATES into dp and the parameter gradients.
#pragma once

namespace zaya {

struct ConvShape {
  int B, T, C, hd, K0, K1;
  int rows_per_batch() const { return T + K1 - 1; }
  int rows() const { return B * rows_per_batch(); }
};

// w1 [C, hd, K1] is repacked into w1p [K1, C, hd] (scratch) for unit-stride GEMMs.
// halo [B, P, C] (nullable): the P steps before this shard (context parallel); zeros if null.
template <class T>
void causal_conv_forward(T* out_tall, T* y0_tall, T* w1p, const T* p, const T* halo, const T* w0, const T* b0,
                         const T* w1, const T* b1, const ConvShape& s);
// Stage 1 alone (inference does stage 2 over the stored bf16 weights): y0_tall from p.
template <class T>
void causal_conv_depthwise(T* y0_tall, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s);
// The same for batch row b's rows and channels [c0, c1) only (one task of decode's split).
template <class T>
void causal_conv_depthwise_part(T* y0_tall, const T* p, const T* halo, const T* w0, const T* b0, const ConvShape& s,
                                int b, int c0, int c1);
// Stage 2's bias on the tall output, the junk rows zeroed (causal_conv_forward's last step).
template <class T>
void causal_conv_bias(T* out_tall, const T* b1, const ConvShape& s);
// The same for batch row b's rows and channels [c0, c1) only.
template <class T>
void causal_conv_bias_part(T* out_tall, const T* b1, const ConvShape& s, int b, int c0, int c1);
// dout_tall: gradient of out in the tall layout, junk rows zero. dy0_tall, dw1p, w1p: scratch
// (w1p is repacked from w1 here: the forward's packing may have been overwritten).
// dhalo (nullable): gradient flowing into the halo (context parallel).
template <class T>
void causal_conv_backward(T* dp, T* dhalo, T* dw0, T* db0, T* dw1, T* db1, T* dy0_tall, T* dw1p, const T* dout_tall,
                          const T* y0_tall, T* w1p, const T* w1, const T* p, const T* halo, const T* w0,
                          const ConvShape& s);

}  // namespace zaya
