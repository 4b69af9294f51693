// Context parallelism behind the model's SeqShard seam (model/cca.h).
//
// The CP group splits every sequence into equal shards, CP rank r holding positions
// [r*T, (r+1)*T). Per attention sub-layer:
//   forward:  send/recv of the halo (the last P = (K0-1)+(K1-1) pre-conv vectors and the
//             last x of each batch row) from rank r-1 to r; an all-gather of K and V (each
//             rank then attends over ranks 0..r, causal with q_pos0 = r*T).
//   backward: a reduce-scatter of dK/dV (rank r's rows summed over the ranks that attended
//             to them), then the halo gradients go back from r to r-1 with send/recv.
// Everything else in the model is per token, so the loss and every gradient match the
// unsplit sequence; the parameter gradients are summed over the CP group by ZeRO-1.
#pragma once
#include <vector>

#include "comm/comm.h"
#include "model/cca.h"

namespace zaya::parallel {

template <class T>
class CpShard : public SeqShard<T> {
 public:
  explicit CpShard(const comm::Communicator& cp_group) : comm_(cp_group) {}
  int index() const override { return comm_.rank(); }
  int count() const override { return comm_.size(); }
  void halo(const T* p_NC, const T* x_ND, int B, int T_, int C, int P, int D, T* halo_BPC, T* x_prev_BD) override;
  void gather_kv(const T* k, int ldk, const T* v, int B, int T_, int KD, T* k_all, T* v_all) override;
  void reduce_kv_grads(const T* dk_all, const T* dv_all, int B, int T_, int KD, T* dk, T* dv) override;
  void halo_grads(const T* dhalo_BPC, const T* dx_prev_BD, int B, int T_, int C, int P, int D, T* dp_NC,
                  T* dx_ND) override;
  double comm_seconds = 0;  // time in this layer's exchanges (blocking)

 private:
  comm::Communicator comm_;
  std::vector<T> send_, recv_;
};

}  // namespace zaya::parallel
