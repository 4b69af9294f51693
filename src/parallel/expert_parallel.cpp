#include "parallel/expert_parallel.h"

#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace zaya::parallel {

ExpertRange ep_expert_range(int num_experts, int ep, int ep_rank) {
  ZAYA_CHECK(ep >= 1 && num_experts % ep == 0, "expert parallel: ", num_experts, " experts do not split evenly over ep=",
             ep, " ranks");
  const int n = num_experts / ep;
  return {ep_rank * n, (ep_rank + 1) * n};
}

template <class T>
EpExperts<T>::EpExperts(const comm::Communicator& ep_group, ExpertRange local, int num_moe_layers)
    : comm_(ep_group), range_(local) {
  ZAYA_CHECK(local.count() > 0, "expert parallel: empty expert range on EP rank ", ep_group.rank());
  layers_.reserve(size_t(num_moe_layers));
  for (int i = 0; i < num_moe_layers; ++i) layers_.emplace_back(local);
}

template <class T>
void EpExperts<T>::resize(const ModelConfig& c, int max_rows) {
  cfg_ = c;
  E_ = c.num_experts;
  El_ = range_.count();
  D_ = c.hidden_size;
  ZAYA_CHECK(El_ * comm_.size() == E_, "expert parallel: ", El_, " experts per rank x ", comm_.size(),
             " EP ranks != ", E_, " experts");
  ZAYA_CHECK(range_.begin == comm_.rank() * El_, "expert parallel: EP rank ", comm_.rank(), " holds experts from ",
             range_.begin, ", expected ", comm_.rank() * El_);
  // Expect about an even share; grow on demand (dropless).
  for (Layer& L : layers_)
    if (L.cap < max_rows) L.local.resize(c, max_rows), L.cap = max_rows, L.xs.resize(size_t(max_rows) * D_);
}

template <class T>
void EpExperts<T>::route(int mi, const int64_t* counts) {
  ZAYA_CHECK(mi >= 0 && size_t(mi) < layers_.size(), "expert parallel: MoE sub-layer ", mi, " out of range");
  Layer& L = layers_[size_t(mi)];
  const size_t P = size_t(comm_.size()), El = size_t(El_);
  L.recv_counts.assign(P * El, 0);
  std::vector<size_t> cnt(P, El), displ(P);
  for (size_t q = 0; q < P; ++q) displ[q] = q * El;
  Timer t;
  comm_.alltoallv(counts, cnt, displ, L.recv_counts.data(), cnt, displ);
  comm_seconds += t.seconds();
  L.send_rows.assign(P, 0), L.send_displ.assign(P, 0), L.recv_rows.assign(P, 0), L.recv_displ.assign(P, 0);
  L.local_counts.assign(size_t(E_), 0);
  size_t so = 0, ro = 0;
  for (size_t q = 0; q < P; ++q) {
    for (size_t j = 0; j < El; ++j) {
      L.send_rows[q] += size_t(counts[q * El + j]);
      L.recv_rows[q] += size_t(L.recv_counts[q * El + j]);
      L.local_counts[size_t(range_.begin) + j] += L.recv_counts[q * El + j];
    }
    L.send_displ[q] = so, L.recv_displ[q] = ro;
    so += L.send_rows[q], ro += L.recv_rows[q];
  }
  L.total = ro;
  if (L.total > size_t(L.cap)) {  // imbalance beyond the reserve: grow (dropless)
    L.cap = int(L.total);
    L.local.resize(cfg_, L.cap);
    L.xs.resize(L.total * size_t(D_));
  }
  const size_t need = std::max(L.total, so) * size_t(D_);
  for (auto* b : {&buf_a_, &buf_b_, &buf_c_})
    if (b->size() < need) b->resize(need);
}

// Copies between source-major (source, expert) and expert-major (expert, source) row order.
template <class T>
static void reorder(const std::vector<int64_t>& rc, const std::vector<size_t>& recv_displ, size_t P, size_t El,
                    size_t D, const T* src, T* dst, bool to_expert_major) {
  size_t em = 0;
  for (size_t j = 0; j < El; ++j)
    for (size_t s = 0; s < P; ++s) {
      size_t sm = recv_displ[s];
      for (size_t jj = 0; jj < j; ++jj) sm += size_t(rc[s * El + jj]);
      const size_t n = size_t(rc[s * El + j]);
      if (n) {
        if (to_expert_major)
          std::memcpy(dst + em * D, src + sm * D, n * D * sizeof(T));
        else
          std::memcpy(dst + sm * D, src + em * D, n * D * sizeof(T));
      }
      em += n;
    }
}

static std::vector<size_t> times(const std::vector<size_t>& v, size_t k) {
  std::vector<size_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = v[i] * k;
  return o;
}

template <class T>
void EpExperts<T>::dispatch(Layer& L, const T* src, T* dst) {
  const size_t D = size_t(D_);
  Timer t;
  comm_.alltoallv(src, times(L.send_rows, D), times(L.send_displ, D), buf_a_.data(), times(L.recv_rows, D),
                  times(L.recv_displ, D));
  comm_seconds += t.seconds();
  reorder(L.recv_counts, L.recv_displ, size_t(comm_.size()), size_t(El_), D, buf_a_.data(), dst, true);
}

template <class T>
void EpExperts<T>::combine(Layer& L, const T* src, T* dst) {
  const size_t D = size_t(D_);
  reorder(L.recv_counts, L.recv_displ, size_t(comm_.size()), size_t(El_), D, src, buf_a_.data(), false);
  Timer t;
  comm_.alltoallv(static_cast<const T*>(buf_a_.data()), times(L.recv_rows, D), times(L.recv_displ, D), dst,
                  times(L.send_rows, D), times(L.send_displ, D));
  comm_seconds += t.seconds();
}

template <class T>
void EpExperts<T>::forward(int mi, const int64_t* counts, const T* x, T* y, const T* W, const MoeOffsets& o) {
  route(mi, counts);
  Layer& L = layers_[size_t(mi)];
  dispatch(L, x, L.xs.data());
  L.local.forward(0, L.local_counts.data(), L.xs.data(), buf_b_.data(), W, o);
  combine(L, buf_b_.data(), y);
}

template <class T>
void EpExperts<T>::backward(int mi, const int64_t* counts, const T* /*x*/, const T* dy, T* dx, const T* W, T* dW,
                            const MoeOffsets& o, GradMode mode) {
  Layer& L = layers_[size_t(mi)];
  const size_t P = size_t(comm_.size()), El = size_t(El_);
  for (size_t q = 0; q < P; ++q) {  // the routing must be the forward's
    size_t n = 0;
    for (size_t j = 0; j < El; ++j) n += size_t(counts[q * El + j]);
    ZAYA_CHECK(n == L.send_rows[q], "expert parallel: backward of MoE sub-layer ", mi,
               " with counts that differ from its forward");
  }
  dispatch(L, dy, buf_b_.data());
  L.local.backward(0, L.local_counts.data(), L.xs.data(), buf_b_.data(), buf_c_.data(), W, dW, o, mode);
  combine(L, buf_c_.data(), dx);
}

template class EpExperts<float>;
template class EpExperts<double>;

}  // namespace zaya::parallel
