#include "parallel/context_parallel.h"

#include <algorithm>
#include <cstring>

#include "core/timer.h"

namespace zaya::parallel {
namespace {
constexpr int kTagHalo = 31, kTagHaloGrad = 32;
}

template <class T>
void CpShard<T>::halo(const T* p, const T* x, int B, int T_, int C, int P, int D, T* halo, T* x_prev) {
  Timer t;
  const int r = comm_.rank(), n = comm_.size();
  const size_t per = size_t(P) * C + D;  // one batch row's halo: P pre-conv rows, then x
  std::vector<comm::Request> reqs;
  if (r + 1 < n) {
    send_.resize(size_t(B) * per);
    for (int b = 0; b < B; ++b) {
      T* s = send_.data() + size_t(b) * per;
      std::memcpy(s, p + (size_t(b) * T_ + T_ - P) * C, sizeof(T) * P * C);
      std::memcpy(s + size_t(P) * C, x + (size_t(b) * T_ + T_ - 1) * D, sizeof(T) * D);
    }
    reqs.push_back(comm_.isend(send_.data(), send_.size(), r + 1, kTagHalo));
  }
  if (r > 0) {
    recv_.resize(size_t(B) * per);
    reqs.push_back(comm_.irecv(recv_.data(), recv_.size(), r - 1, kTagHalo));
  }
  comm::wait_all(reqs);
  if (r > 0)
    for (int b = 0; b < B; ++b) {
      const T* s = recv_.data() + size_t(b) * per;
      std::memcpy(halo + size_t(b) * P * C, s, sizeof(T) * P * C);
      std::memcpy(x_prev + size_t(b) * D, s + size_t(P) * C, sizeof(T) * D);
    }
  comm_seconds += t.seconds();
}

template <class T>
void CpShard<T>::gather_kv(const T* k, int ldk, const T* v, int B, int T_, int KD, T* k_all, T* v_all) {
  Timer t;
  const int r = comm_.rank(), n = comm_.size();
  const size_t block = 2 * size_t(B) * T_ * KD;  // one rank's k then v, [B, T, KD] each
  std::vector<size_t> counts(static_cast<size_t>(n), block), displs(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) displs[size_t(q)] = size_t(q) * block;
  recv_.resize(block * size_t(n));
  T* mine = recv_.data() + size_t(r) * block;
  for (size_t i = 0; i < size_t(B) * T_; ++i) {
    std::memcpy(mine + i * KD, k + i * size_t(ldk), sizeof(T) * KD);
    std::memcpy(mine + block / 2 + i * KD, v + i * KD, sizeof(T) * KD);
  }
  comm_.all_gatherv(recv_.data(), counts, displs);
  const size_t Tk = size_t(r + 1) * T_;
  for (int q = 0; q <= r; ++q) {
    const T* src = recv_.data() + size_t(q) * block;
    for (int b = 0; b < B; ++b) {
      const size_t from = size_t(b) * T_ * KD, to = (size_t(b) * Tk + size_t(q) * T_) * KD;
      std::memcpy(k_all + to, src + from, sizeof(T) * T_ * KD);
      std::memcpy(v_all + to, src + block / 2 + from, sizeof(T) * T_ * KD);
    }
  }
  comm_seconds += t.seconds();
}

template <class T>
void CpShard<T>::reduce_kv_grads(const T* dk_all, const T* dv_all, int B, int T_, int KD, T* dk, T* dv) {
  Timer t;
  const int r = comm_.rank(), n = comm_.size();
  const size_t block = 2 * size_t(B) * T_ * KD, Tk = size_t(r + 1) * T_;
  send_.assign(block * size_t(n), T(0));  // ranks after this one got no attention from it
  for (int q = 0; q <= r; ++q) {
    T* dst = send_.data() + size_t(q) * block;
    for (int b = 0; b < B; ++b) {
      const size_t from = (size_t(b) * Tk + size_t(q) * T_) * KD, to = size_t(b) * T_ * KD;
      std::memcpy(dst + to, dk_all + from, sizeof(T) * T_ * KD);
      std::memcpy(dst + block / 2 + to, dv_all + from, sizeof(T) * T_ * KD);
    }
  }
  recv_.resize(block);
  comm_.reduce_scatterv(send_.data(), recv_.data(), std::vector<size_t>(size_t(n), block));
  std::memcpy(dk, recv_.data(), sizeof(T) * block / 2);
  std::memcpy(dv, recv_.data() + block / 2, sizeof(T) * block / 2);
  comm_seconds += t.seconds();
}

template <class T>
void CpShard<T>::halo_grads(const T* dhalo, const T* dx_prev, int B, int T_, int C, int P, int D, T* dp, T* dx) {
  Timer t;
  const int r = comm_.rank(), n = comm_.size();
  const size_t per = size_t(P) * C + D;
  std::vector<comm::Request> reqs;
  if (r > 0) {
    send_.resize(size_t(B) * per);
    for (int b = 0; b < B; ++b) {
      T* s = send_.data() + size_t(b) * per;
      std::memcpy(s, dhalo + size_t(b) * P * C, sizeof(T) * P * C);
      std::memcpy(s + size_t(P) * C, dx_prev + size_t(b) * D, sizeof(T) * D);
    }
    reqs.push_back(comm_.isend(send_.data(), send_.size(), r - 1, kTagHaloGrad));
  }
  if (r + 1 < n) {
    recv_.resize(size_t(B) * per);
    reqs.push_back(comm_.irecv(recv_.data(), recv_.size(), r + 1, kTagHaloGrad));
  }
  comm::wait_all(reqs);
  if (r + 1 < n)
    for (int b = 0; b < B; ++b) {
      const T* s = recv_.data() + size_t(b) * per;
      T* dpb = dp + (size_t(b) * T_ + T_ - P) * C;
      for (size_t i = 0; i < size_t(P) * C; ++i) dpb[i] += s[i];
      T* dxb = dx + (size_t(b) * T_ + T_ - 1) * D;
      for (int i = 0; i < D; ++i) dxb[i] += s[size_t(P) * C + size_t(i)];
    }
  comm_seconds += t.seconds();
}

template class CpShard<float>;
template class CpShard<double>;

}  // namespace zaya::parallel
