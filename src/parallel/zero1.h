// ZeRO-1 data parallelism over the model's flat parameter / gradient buffers.
//
// Per step (grads already accumulated, each rank's backward scaled so that the SUM over
// ranks is the gradient of the global-batch mean):
//   1. begin(grads), then grads_ready(from) as backward finishes sub-layers (grads at flat
//      offsets >= from are final: backward runs from the last sub-layer, which sits at the
//      top of the buffer, down to the embedding at 0): every bucket lying wholly in
//      [from, total) is reduce-scattered over the DP group, non-blocking, while backward
//      goes on. finish() issues the rest and waits.
//   2. Context parallel: CP ranks hold the same parameters and shard, each with the gradient
//      of its own sequence positions: the shard is all-reduced over the CP group.
//      Expert parallel: non-expert tensors are replicated over the EP group, so their
//      (DP-reduced) shard is then all-reduced over the EP group; expert weights are not
//      (each EP rank holds different experts): their gradients are reduced over DP only.
//   3. grad_norm(): partial sums of squares of this rank's shard (non-expert parts counted
//      by EP rank 0 only), all-reduced over the world: the norm of the global gradient.
//   4. The caller's optimizer steps owned() (shard_ranges over the DP group: Muon tensors
//      whole, so each Muon matrix is orthogonalised by exactly one rank on its full reduced
//      gradient; AdamW tensors may be cut anywhere) from grads(); gather() then all-gathers
//      the updated parameters over the DP group (in place).
// The optimizer keeps state only for owned(): (n-1)/n of it is gone from each rank.
// With shard = false the same class runs plain DP (bucketed all-reduce, replicated
// optimizer over the whole buffer), for comparisons.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.h"
#include "core/bf16.h"
#include "model/params.h"

namespace zaya::parallel {

struct Zero1Settings {
  size_t bucket_elems = size_t(1) << 20;  // reduce-scatter bucket size (fp32 elements)
  bool shard = true;                      // false: all-reduce + replicated optimizer
};

struct CommStats {
  double exposed_s = 0;  // time blocked waiting for gradient reduction (not overlapped)
  double gather_s = 0;   // parameter all-gather (blocking)
  double other_s = 0;    // CP / EP all-reduces, norm, counts, loss
  void clear() { *this = {}; }
  double total() const { return exposed_s + gather_s + other_s; }
};

class Zero1 {
 public:
  Zero1(const ParamTable& table, const comm::Groups& g, Zero1Settings z = {});

  void begin(float* grads);
  void grads_ready(size_t from);
  void finish();
  double grad_norm();
  // After the optimizer stepped owned(): all-gathers the parameters over DP. params_bf16: the
  // weights' bf16 copy the optimizer wrote in its pass, if any. Returns whether all of it is
  // now current (ZeRO-1 over several ranks wrote only this shard's).
  bool gather(float* params, const bf16* params_bf16 = nullptr);
  float* grads() const { return grads_; }  // the reduced gradients (full flat array)

  // Sum over the world (every rank sees the global batch): loss sums, router class counts.
  void all_reduce_sum(double* v, size_t n);
  void all_reduce_sum(int64_t* v, size_t n);

  FlatRange owned() const { return own_; }
  const std::vector<FlatRange>& ranges() const { return ranges_; }
  CommStats& stats() { return stats_; }

 private:
  void issue(size_t bucket);

  const ParamTable& table_;
  comm::Groups g_;
  Zero1Settings z_;
  std::vector<FlatRange> ranges_;  // per DP rank
  FlatRange own_;
  std::vector<FlatRange> buckets_;     // ascending
  std::vector<FlatRange> nonexpert_;   // non-expert runs inside own_
  std::vector<FlatRange> expert_;      // expert runs inside own_
  std::vector<float> shard_;           // reduce-scatter destination over own_
  std::vector<comm::Request> pending_;
  size_t next_ = 0;                    // buckets_[next_ - 1 ..] from the top not yet issued; next_ = count left
  float* grads_ = nullptr;
  CommStats stats_;
};

}  // namespace zaya::parallel
