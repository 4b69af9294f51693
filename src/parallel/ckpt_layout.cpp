#include "parallel/ckpt_layout.h"

#include <algorithm>
#include <cstdio>

namespace zaya::parallel {

std::vector<SliceCut> rank_param_cuts(const ParamTable& local, FlatRange own, const comm::Layout& L, bool zero1) {
  std::vector<SliceCut> out;
  if (L.cp_rank != 0 || (!zero1 && L.dp_rank != 0)) return out;
  for (const ParamInfo& p : local.params) {
    if (p.expert < 0 && L.ep_rank != 0) continue;
    const size_t b = std::max(p.offset, own.begin), e = std::min(p.offset + p.numel, own.end);
    if (b < e) out.push_back({&p, b - p.offset, e - p.offset});
  }
  return out;
}

std::string rank_file(const char* kind, int world_rank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-r%05d.safetensors", kind, world_rank);
  return buf;
}

comm::Layout layout_of_rank(int dp, int ep, int cp, int r) {
  comm::Layout L;
  L.dp = dp, L.ep = ep, L.cp = cp;
  L.cp_rank = r % cp;
  L.ep_rank = (r / cp) % ep;
  L.dp_rank = r / (cp * ep);
  return L;
}

}  // namespace zaya::parallel
