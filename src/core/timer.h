#pragma once
#include <chrono>

namespace zaya {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Timer {
  double t0 = now_seconds();
  double seconds() const { return now_seconds() - t0; }
  void reset() { t0 = now_seconds(); }
};

}  // namespace zaya
