// The process's global operator new / delete: blocks of 4 KB and more start on a 64-byte cache
// line, smaller ones are malloc's. Every std::vector of activations, gradients, scratch and
// packed operands is such a block. glibc's malloc returns 16 mod 64 for them, so each row of a
// buffer whose row stride is a multiple of 64 bytes started 16 bytes into a line: every 64-byte
// vector load of it touched two lines (the products read activations in place, the elementwise
// loops stream them), and two threads writing neighbouring column ranges of the same rows (a
// head, a convolution group each) shared the line at each boundary. zaya1-small, 2 threads,
// AMD Zen 5, bench/ab_step.sh against the same build without this file (attention's split of
// attention.h already in), 8 alternated rounds: fp32 +6.4% median tokens/s (faster in every
// round), bf16 +6.6% (7 rounds of 8). The training results are bit-identical (a demo run's
// checkpoint after 30 steps compared byte for byte).
//
// Linked into every executable through zaya_core: the executables reference operator new, so
// the linker takes this object from the archive before libstdc++'s definitions. free() takes
// both malloc's and aligned_alloc's blocks, so any delete of any block is right. Sanitizer
// builds (make test-asan, make fuzz) keep the sanitizer's own operator new, which checks that
// each block is deleted as it was allocated.
#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZAYA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ZAYA_ASAN 1
#endif

#ifndef ZAYA_ASAN
namespace {

constexpr std::size_t kLine = 64, kAlignFrom = 4096;

void* allocate(std::size_t n) {
  if (n < kAlignFrom) return std::malloc(n ? n : 1);
  return std::aligned_alloc(kLine, (n + kLine - 1) / kLine * kLine);  // a multiple of the alignment (C11)
}

void* allocate_or_throw(std::size_t n) {
  for (;;) {
    if (void* p = allocate(n)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif  // ZAYA_ASAN
