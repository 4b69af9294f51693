#include "parallel/zero1.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/timer.h"

namespace zaya::parallel {
namespace {

// Runs of tensors (merged when adjacent) with expert == want, clipped to r.
std::vector<FlatRange> runs(const ParamTable& t, FlatRange r, bool want_expert) {
  std::vector<FlatRange> out;
  for (const ParamInfo& p : t.params) {
    if ((p.expert >= 0) != want_expert) continue;
    const size_t b = std::max(p.offset, r.begin), e = std::min(p.offset + p.numel, r.end);
    if (b >= e) continue;
    if (!out.empty() && out.back().end == b)
      out.back().end = e;
    else
      out.push_back({b, e});
  }
  return out;
}

}  // namespace

Zero1::Zero1(const ParamTable& table, const comm::Groups& g, Zero1Settings z)
    : table_(table), g_(g), z_(z) {
  ZAYA_CHECK(z.bucket_elems > 0, "zero1: bucket size must be > 0");
  const int n = g_.dp.size();
  if (z_.shard) {
    ranges_ = shard_ranges(table, n, /*muon_whole=*/true);
    own_ = ranges_[size_t(g_.dp.rank())];
  } else {
    ranges_.assign(size_t(n), FlatRange{0, 0});
    own_ = {0, table.total};
  }
  for (size_t b = 0; b < table.total; b += z_.bucket_elems)
    buckets_.push_back({b, std::min(b + z_.bucket_elems, table.total)});
  nonexpert_ = runs(table, own_, false);
  expert_ = runs(table, own_, true);
  if (z_.shard) shard_.assign(own_.size(), 0.f);
}

void Zero1::begin(float* grads) {
  ZAYA_CHECK(pending_.empty(), "zero1: begin() while a previous reduction is still pending");
  grads_ = grads;
  next_ = buckets_.size();
}

void Zero1::issue(size_t k) {
  const FlatRange bk = buckets_[k];
  if (g_.dp.size() == 1) return;  // nothing to reduce over DP
  if (!z_.shard) {
    pending_.push_back(g_.dp.iall_reduce(grads_ + bk.begin, bk.size()));
    return;
  }
  std::vector<size_t> counts(ranges_.size());
  for (size_t r = 0; r < ranges_.size(); ++r) {
    const size_t b = std::max(bk.begin, ranges_[r].begin), e = std::min(bk.end, ranges_[r].end);
    counts[r] = e > b ? e - b : 0;
  }
  const size_t mine = std::max(bk.begin, own_.begin);
  float* dst = counts[size_t(g_.dp.rank())] ? shard_.data() + (mine - own_.begin) : shard_.data();
  pending_.push_back(g_.dp.ireduce_scatterv(grads_ + bk.begin, dst, counts));
}

void Zero1::grads_ready(size_t from) {
  ZAYA_CHECK(grads_, "zero1: grads_ready() before begin()");
  while (next_ > 0 && buckets_[next_ - 1].begin >= from) issue(--next_);
  // MPI progresses non-blocking collectives only inside MPI calls: poke the pending ones so
  // they advance while backward computes the next sub-layer.
  for (comm::Request& r : pending_)
    if (r.pending()) r.test();
}

void Zero1::finish() {
  grads_ready(0);
  Timer t;
  comm::wait_all(pending_);
  pending_.clear();
  if (z_.shard && g_.dp.size() > 1 && own_.size())
    std::memcpy(grads_ + own_.begin, shard_.data(), own_.size() * sizeof(float));
  stats_.exposed_s += t.seconds();
  if (g_.cp.size() > 1 && own_.size()) {  // CP ranks hold the same shard, each with its positions' share
    Timer t2;
    g_.cp.all_reduce(grads_ + own_.begin, own_.size());
    stats_.other_s += t2.seconds();
  }
  if (g_.ep.size() > 1) {  // non-expert tensors are replicated over EP: sum their gradients
    Timer t2;
    std::vector<comm::Request> reqs;
    for (const FlatRange& r : nonexpert_) reqs.push_back(g_.ep.iall_reduce(grads_ + r.begin, r.size()));
    comm::wait_all(reqs);
    stats_.other_s += t2.seconds();
  }
}

double Zero1::grad_norm() {
  double ss = 0;
  // Replicated copies count once: without a shard only DP rank 0, and only CP rank 0.
  const bool count_all = (z_.shard || g_.dp.rank() == 0) && g_.cp.rank() == 0;
  if (count_all) {
    for (const FlatRange& r : expert_) ss += sum_squares(grads_, r);
    if (g_.ep.rank() == 0)
      for (const FlatRange& r : nonexpert_) ss += sum_squares(grads_, r);
  }
  Timer t;
  g_.world.all_reduce(&ss, 1);
  stats_.other_s += t.seconds();
  return std::sqrt(ss);
}

bool Zero1::gather(float* params, const bf16* params_bf16) {
  if (!z_.shard || g_.dp.size() == 1) return params_bf16 != nullptr;
  Timer t;
  std::vector<size_t> counts(ranges_.size()), displs(ranges_.size());
  for (size_t r = 0; r < ranges_.size(); ++r) counts[r] = ranges_[r].size(), displs[r] = ranges_[r].begin;
  g_.dp.all_gatherv(params, counts, displs);
  stats_.gather_s += t.seconds();
  return false;
}

void Zero1::all_reduce_sum(double* v, size_t n) {
  Timer t;
  g_.world.all_reduce(v, n);
  stats_.other_s += t.seconds();
}

void Zero1::all_reduce_sum(int64_t* v, size_t n) {
  Timer t;
  g_.world.all_reduce(v, n);
  stats_.other_s += t.seconds();
}

}  // namespace zaya::parallel
