// Incremental decoding: prefill a prompt, then one token at a time, with the CCA decode
// state (KV cache, conv tail, previous x) of every attention sub-layer. Prefill followed by
// single-token steps gives the same logits as one full forward (tested).
#pragma once
#include "model/model.h"

namespace zaya {

template <class T>
class Decoder {
 public:
  Decoder(Model<T>& m, int batch, int max_len);
  // tokens [batch, n]: prefill (n > 1) or one step (n = 1). Returns the logits of the last
  // position of every row, [batch, V] (valid until the next call).
  const T* feed(const int32_t* tokens_BN, int n);
  void reset();
  int pos() const { return state_.len; }
  int batch() const { return batch_; }
  int max_len() const { return max_len_; }

 private:
  Model<T>& m_;
  int batch_, max_len_;
  DecodeState<T> state_;
  std::vector<T> last_BV_;
};

}  // namespace zaya
