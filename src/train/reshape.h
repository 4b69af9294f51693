// Offline checkpoint reshaping: `zaya ckpt reshape SRC DST --dp N --ep M --cp K`.
//
// Everything in a zaya checkpoint is a named global tensor (ckpt/checkpoint.h), so a reshape
// re-cuts the slices for the new layout (parallel/ckpt_layout.h, exactly as a run at that
// layout would save) and rewrites the per-rank files: parameters, Muon momentum and AdamW
// moments (ZeRO-1 shards re-cut for the new DP), experts and their optimizer state regrouped
// for the new EP, balancing biases and their optimizer state, and the JSON state (data
// loader, optimizer step, trainer, RNG seed) unchanged: the loader's state is global, so
// the new layout consumes the same global sample order. A run resumed from the result is
// bit-identical to one that resharded the source at load time.
//
// DST is a checkpoint root: DST/step_XXXXXXXX plus DST/latest, written through a temporary
// directory and renamed, so nothing incomplete is ever visible there. Errors (a layout that
// cannot hold the model, a corrupt source, a DST that already holds a checkpoint) are one
// line, and leave DST as it was.
#pragma once
#include <cstdint>
#include <string>

namespace zaya {

struct ReshapeOptions {
  int dp = 1, ep = 1, cp = 1;
  int zero1 = -1;  // -1: as the source; 0: replicated optimizer state (DP rank 0 writes it); 1: ZeRO-1
};

struct ReshapeResult {
  std::string dir;  // the new step directory
  int64_t step = 0;
  size_t tensors = 0, slices = 0, files = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

ReshapeResult reshape_checkpoint(const std::string& src, const std::string& dst_root, const ReshapeOptions& o);

}  // namespace zaya
