// Which slices of the global checkpoint tensors a rank writes, for any DP x EP x CP layout.
// One definition serves the trainer's save (trainer_ckpt.cpp) and the offline reshape
// (reshape.cpp), so a reshaped checkpoint is cut exactly as a run at the new layout would
// have cut it.
//   - param/X and optim.m|v/X: each rank writes the part of its ZeRO-1 shard (the DP
//     shard_ranges of its local flat buffer; without ZeRO-1, DP rank 0 holds everything)
//     that falls in X, for its own experts, and for the non-expert tensors only as EP rank 0
//     (they are replicated over EP) and only as CP rank 0 (replicated over CP).
//   - buffer/X and balancer.*/X: world rank 0, whole.
// Every element of every tensor is written by exactly one rank.
#pragma once
#include <string>
#include <vector>

#include "comm/comm.h"
#include "model/params.h"

namespace zaya::parallel {

struct SliceCut {
  const ParamInfo* p;   // the tensor (in the rank's local table; its name and shape are global)
  size_t begin, end;    // element range within the tensor
  size_t flat() const { return p->offset + begin; }  // first element in the local flat buffer
};

// own: the rank's ZeRO-1 shard of its local flat buffer (shard_ranges(table, dp, true)[dp_rank],
// or the whole buffer without ZeRO-1).
std::vector<SliceCut> rank_param_cuts(const ParamTable& local, FlatRange own, const comm::Layout& L, bool zero1);

std::string rank_file(const char* kind, int world_rank);  // "params-r00003.safetensors"

// The (dp, ep, cp) coordinates of world rank r (comm/comm.h's rank order).
comm::Layout layout_of_rank(int dp, int ep, int cp, int world_rank);

}  // namespace zaya::parallel
