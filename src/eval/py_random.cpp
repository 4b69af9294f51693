#include "eval/py_random.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "core/error.h"

namespace zaya::eval {

namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // CPython's random_seed: the absolute value as little-endian 32-bit words, at least one.
  std::vector<uint32_t> key{uint32_t(seed)};
  if (seed >> 32) key.push_back(uint32_t(seed >> 32));
  init_by_array(key);
}

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i) mt_[size_t(i)] = 1812433253u * (mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) + uint32_t(i);
  mti_ = kN;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218u);
  size_t i = 1, j = 0;
  for (size_t k = std::max<size_t>(kN, key.size()); k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + uint32_t(j);  // non-linear
    if (++i >= size_t(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (++j >= key.size()) j = 0;
  }
  for (size_t k = kN - 1; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - uint32_t(i);
    if (++i >= size_t(kN)) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // the most significant bit set: a non-zero initial state
}

uint32_t PyRandom::genrand_uint32() {
  if (mti_ >= kN) {  // the next 624 words at once
    auto twist = [&](int a, int b, int c) {
      const uint32_t y = (mt_[size_t(a)] & kUpper) | (mt_[size_t(b)] & kLower);
      mt_[size_t(a)] = mt_[size_t(c)] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    };
    int kk = 0;
    for (; kk < kN - kM; ++kk) twist(kk, kk + 1, kk + kM);
    for (; kk < kN - 1; ++kk) twist(kk, kk + 1, kk + (kM - kN));
    twist(kN - 1, 0, kM - 1);
    mti_ = 0;
  }
  uint32_t y = mt_[size_t(mti_++)];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  ZAYA_CHECK(k >= 0 && k <= 64, "getrandbits: ", k, " bits (0 to 64)");
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  // Words from the least significant up; the last one keeps its top k - 32 bits.
  const uint64_t lo = genrand_uint32();
  const uint64_t hi = genrand_uint32() >> (64 - k);
  return lo | (hi << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  ZAYA_CHECK(n > 0, "randbelow: n must be positive");
  const int k = 64 - __builtin_clzll(n);  // n.bit_length(), not (n - 1)'s: n may be 1
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<size_t> PyRandom::sample(size_t n, size_t k) {
  ZAYA_CHECK(k <= n, "sample: ", k, " items from a population of ", n);
  std::vector<size_t> out(k);
  // CPython picks by memory: a pool list of n when it is smaller than a set of k entries.
  double setsize = 21;
  if (k > 5) setsize += std::pow(4.0, std::ceil(std::log(double(k * 3)) / std::log(4.0)));
  if (double(n) <= setsize) {
    std::vector<size_t> pool(n);
    for (size_t i = 0; i < n; ++i) pool[i] = i;
    for (size_t i = 0; i < k; ++i) {
      const size_t j = size_t(randbelow(n - i));
      out[i] = pool[j];
      pool[j] = pool[n - i - 1];  // the unselected last one fills the vacancy
    }
  } else {
    std::unordered_set<size_t> selected;
    for (size_t i = 0; i < k; ++i) {
      size_t j = size_t(randbelow(n));
      while (selected.count(j)) j = size_t(randbelow(n));
      selected.insert(j);
      out[i] = j;
    }
  }
  return out;
}

}  // namespace zaya::eval
