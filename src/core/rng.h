// Counter-based random numbers: value i of stream (seed, key) is a pure function of
// (seed, key, i). Parameter init keyed by tensor name therefore gives the same weights
// whatever the sharding or the order tensors are visited in (distributed, reshape).
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace zaya {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t hash_name(std::string_view s) {  // FNV-1a, stable across platforms
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Philox {  // small counter-based stream; state is (key, counter), trivially saved
  uint64_t key = 0, counter = 0;
  Philox() = default;
  Philox(uint64_t seed, uint64_t stream) : key(splitmix64(seed ^ splitmix64(stream))) {}
  uint64_t next_u64() { return splitmix64(key + splitmix64(counter++)); }
  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {                                                   // Box-Muller
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }
};

// Normal sample i of stream (seed, key): stateless, for parameter initialisation.
inline double normal_at(uint64_t seed, uint64_t key, uint64_t i) {
  Philox p(seed, key);
  p.counter = 2 * i;
  return p.normal();
}

}  // namespace zaya
