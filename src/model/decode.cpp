#include "model/decode.h"

#include <cstring>

#include "core/error.h"

namespace zaya {

template <class T>
Decoder<T>::Decoder(Model<T>& m, int batch, int max_len) : m_(m), batch_(batch), max_len_(max_len) {
  ZAYA_CHECK(batch > 0 && max_len > 0, "decoder batch and length must be positive");
  m_.init_decode_state(state_, batch, max_len);
  last_BV_.assign(size_t(batch) * m.cfg().vocab_size, T(0));
}

template <class T>
void Decoder<T>::reset() {
  m_.init_decode_state(state_, batch_, max_len_);
}

template <class T>
const T* Decoder<T>::feed(const int32_t* tokens, int n) {
  ZAYA_CHECK(n > 0, "feed() needs at least one token");
  ZAYA_CHECK(state_.len + n <= max_len_, "decoder is full: ", state_.len, " + ", n, " tokens exceed ", max_len_);
  m_.forward(tokens, nullptr, batch_, n, 0, &state_);
  const size_t V = size_t(m_.cfg().vocab_size);
  for (int b = 0; b < batch_; ++b)
    std::memcpy(&last_BV_[b * V], m_.logits() + (size_t(b) * n + n - 1) * V, sizeof(T) * V);
  return last_BV_.data();
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace zaya
