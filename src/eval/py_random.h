// Python's random.Random, as far as lm-evaluation-harness uses it to draw few-shot examples:
// the MT19937 generator seeded from an integer as CPython seeds it (init_by_array over the
// seed's 32-bit words), getrandbits, _randbelow and random.sample over a population of n
// items (CPython's Lib/random.py and Modules/_randommodule.c). The same seed gives the same
// indices, in the same order, as /usr/bin/python3's random.Random(seed).sample(range(n), k).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zaya::eval {

class PyRandom {
 public:
  explicit PyRandom(uint64_t seed);  // random.Random(seed), seed >= 0
  uint32_t genrand_uint32();
  uint64_t getrandbits(int k);       // 0 <= k <= 64
  uint64_t randbelow(uint64_t n);    // _randbelow_with_getrandbits, n > 0
  // random.sample(range(n), k): k distinct indices; fails when k > n.
  std::vector<std::size_t> sample(std::size_t n, std::size_t k);

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace zaya::eval
