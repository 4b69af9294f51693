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
  char line[256];
  std::snprintf(line, sizeof line, "decode step, ms per token over %d tokens:\n%-26s", tokens_, "zone");
  out += line;
  for (int t = 0; t < nt; ++t) out += (std::snprintf(line, sizeof line, "  thread %-2d", t), line);
  out += "  weight GB/s per thread\n";
  std::vector<double> total(size_t(nt), 0.0);
  for (int z = 0; z < kZones; ++z) {
    out += (std::snprintf(line, sizeof line, "%-26s", names[z]), line);
    for (int t = 0; t < nt; ++t) {
      total[size_t(t)] += ms(t, Zone(z));
      out += (std::snprintf(line, sizeof line, "  %9.2f", ms(t, Zone(z))), line);
    }
    if (z == kProducts || z == kHead)
      for (int t = 0; t < nt; ++t) out += (std::snprintf(line, sizeof line, "  %.1f", gbs(t, Zone(z))), line);
    out += "\n";
  }
  out += (std::snprintf(line, sizeof line, "%-26s", "total"), line);
  for (int t = 0; t < nt; ++t) out += (std::snprintf(line, sizeof line, "  %9.2f", total[size_t(t)]), line);
  out += "\n";
  return out;
}

}  // namespace zaya
