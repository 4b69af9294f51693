// Where a decode step goes, per thread of the team (`zaya generate --profile`,
// bench_zaya1_base): the products over the layers' weights, the LM head, the grouped
// convolution and attention (split over the team), the work one thread does while the others
// wait (norms, CCA's steps between its products, the router, SwiGLU, the combine), and the
// waits at barriers. Products and the head also report the weight bytes they read per second
// of the thread's own time, against which the STREAM triad is the bound.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

class DecodeProfile {
 public:
  enum Zone { kProducts, kHead, kSplit, kSerial, kWait, kZones };
  // Sized for a team of nt threads; keeps what was added so far when nt is unchanged.
  void start(int nt);
  void add(int thread, Zone z, double seconds) { slots_[size_t(thread)].s[z] += seconds; }
  void add_bytes(int thread, Zone z, double bytes) { slots_[size_t(thread)].b[z] += bytes; }
  void end_token() { ++tokens_; }
  int tokens() const { return tokens_; }
  // Milliseconds per token of zone z on thread t; GB/s of a product zone on thread t.
  double ms(int t, Zone z) const;
  double gbs(int t, Zone z) const;
  // A table, one row per zone, one column per thread, ms per token.
  std::string table() const;

 private:
  struct alignas(64) Slot {  // one cache line per thread
    double s[kZones] = {}, b[kZones] = {};
  };
  std::vector<Slot> slots_;
  int tokens_ = 0;
};

}  // namespace zaya
