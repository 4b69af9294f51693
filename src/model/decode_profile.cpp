#include "model/decode_profile.h"

#include <cstdio>

namespace zaya {

void DecodeProfile::start(int nt) {
  if (int(slots_.size()) != nt) slots_.assign(size_t(nt), Slot{}), tokens_ = 0;
}

double DecodeProfile::ms(int t, Zone z) const { return tokens_ ? slots_[size_t(t)].s[z] * 1e3 / tokens_ : 0.0; }

double DecodeProfile::gbs(int t, Zone z) const {
  const Slot& s = slots_[size_t(t)];
  return s.s[z] > 0 ? s.b[z] / s.s[z] * 1e-9 : 0.0;
}

std::string DecodeProfile::table() const {
  static const char* names[kZones] = {"products (layers)", "LM head", "conv groups + attention",
                                      "one thread's work", "waits at barriers"};
  const int nt = int(slots_.size());
  std::string out;
  auto put = [&out](const char* fmt, auto... v) {
    char line[128];
    std::snprintf(line, sizeof line, fmt, v...);
    out += line;
  };
  put("decode step, ms per token over %d tokens:\n%-26s", tokens_, "zone");
  for (int t = 0; t < nt; ++t) put("  thread %-2d", t);
  out += "  weight GB/s per thread\n";
  std::vector<double> total(size_t(nt), 0.0);
  for (int z = 0; z < kZones; ++z) {
    put("%-26s", names[z]);
    for (int t = 0; t < nt; ++t) {
      total[size_t(t)] += ms(t, Zone(z));
      put("  %9.2f", ms(t, Zone(z)));
    }
    if (z == kProducts || z == kHead)
      for (int t = 0; t < nt; ++t) put("  %.1f", gbs(t, Zone(z)));
    out += "\n";
  }
  put("%-26s", "total");
  for (int t = 0; t < nt; ++t) put("  %9.2f", total[size_t(t)]);
  out += "\n";
  return out;
}

}  // namespace zaya
