// Expert parallelism behind the model's ExpertCompute seam.
//
// The E routed experts are split evenly over the EP group: rank q holds experts
// [q E/P, (q+1) E/P) (the Model is built with that ExpertRange, so its parameter table
// holds only those experts' fc1/fc2, named by their global index). Each EP rank routes its
// own tokens; the rows arrive here sorted by global expert, so the rows for rank q are one
// contiguous block.
//   forward:  all-to-all of per-expert row counts (q learns how many rows each source sends
//             for each of its experts), all-to-all-v of the rows, a local re-sort from
//             (source, expert) to (expert, source) order, LocalExperts on the received rows,
//             the inverse re-sort, all-to-all-v of the outputs back to their sources.
//   backward: the same route for dy; the local expert backward accumulates the expert
//             weight gradients (local to this rank; reduced over DP only, never over EP),
//             and dx goes back by the inverse route.
// Dropless whatever the imbalance: the receive buffers grow to what arrives.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "model/moe.h"

namespace zaya::parallel {

// The experts EP rank `ep_rank` of `ep` holds (E must divide evenly).
ExpertRange ep_expert_range(int num_experts, int ep, int ep_rank);

template <class T>
class EpExperts : public ExpertCompute<T> {
 public:
  EpExperts(const comm::Communicator& ep_group, ExpertRange local, int num_moe_layers);
  void resize(const ModelConfig& c, int max_rows) override;
  void forward(int moe_index, const int64_t* counts, const T* x_SD, T* y_SD, const T* W,
               const MoeOffsets& o) override;
  void backward(int moe_index, const int64_t* counts, const T* x_SD, const T* dy_SD, T* dx_SD, const T* W, T* dW,
                const MoeOffsets& o, GradMode mode) override;
  double comm_seconds = 0;  // time in the all-to-alls (blocking)

 private:
  struct Layer {
    std::vector<int64_t> recv_counts;  // [source * El + local expert]
    std::vector<int64_t> local_counts; // [E] rows per global expert received (zero outside range)
    std::vector<size_t> send_rows, send_displ, recv_rows, recv_displ;  // per peer, in rows
    std::vector<T> xs;                 // received rows in expert-major order (saved for backward)
    size_t total = 0;                  // rows received
    LocalExperts<T> local;
    int cap = 0;
    explicit Layer(ExpertRange r) : local(r, 1) {}
  };
  void route(int mi, const int64_t* counts);  // counts exchange and row plans
  // src rows (send order) -> all-to-all -> expert-major into dst; inverse when back.
  void dispatch(Layer& L, const T* src, T* dst);
  void combine(Layer& L, const T* src, T* dst);

  comm::Communicator comm_;
  ExpertRange range_;
  int E_ = 0, El_ = 0, D_ = 0;
  ModelConfig cfg_;
  std::vector<Layer> layers_;
  std::vector<T> buf_a_, buf_b_, buf_c_;  // source-major scratch; expert-major dy / dx (or y)
};

}  // namespace zaya::parallel
