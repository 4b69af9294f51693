// The decode products alone, per weight format: y[1, N] = x[1, K] W[N, K]^T over enough
// copies of one [N, K] matrix that a pass reads far more than the last-level cache (as a
// decode step streams its weights from memory), every thread taking its share of each matrix
// in one OpenMP region with a barrier after each (as InferDecoder runs them). Prints GB/s of
// weight bytes, ns per 256 weights per thread, and the ratio to the STREAM triad and to the
// read-only bandwidth of the same buffer measured in the same run; `best ns` (the fastest
// pass) is the figure to compare kernels by on a shared machine.
//   bench_quant_kernels [--n N] [--k K] [--gb GB] [--passes P] [--threads 1,2] [--types q8_0,q4_0,q4_k,q6_k,bf16]
//                       [--small-pages] [--kernel auto|avx2|portable]
// The weights sit in 2 MB pages, as the decoder's mapped model does (MappedFile::populate);
// --small-pages leaves them in malloc's pages (4 KB where transparent huge pages are
// "madvise"), where software prefetch far ahead crosses more TLB entries.
// --kernel caps the quantized types' kernels (linear_quant_force): AVX2 or the portable loop
// on a CPU that has better, to compare them on one machine.
// --attention CTX[,CTX]: instead, decode attention of ZAYA1-base's shape (8 query heads over
// 2 KV heads of 128) over bf16 and fp32 caches of CTX positions, on each kernel this CPU has:
// us per layer and GB/s of cache read, over enough layers' caches to leave the caches.
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/mem_bench.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/attention_group.h"
#include "kernels/attention_quant.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"

using namespace zaya;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = s.find(',', p);
    out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

// `copies` matrices back to back, in 2 MB pages where asked (as the decoder maps a model:
// MappedFile::populate), else in whatever pages malloc gives (4 KB under THP "madvise").
struct PageBuffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  PageBuffer() = default;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  ~PageBuffer() { std::free(p); }
  void allocate(size_t bytes, bool huge) {
    constexpr size_t kHuge = size_t(2) << 20;
    n = bytes;
    p = static_cast<uint8_t*>(std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge));
    if (!p) fail("cannot allocate " + std::to_string(bytes) + " bytes of weights");
    if (huge) madvise(p, (bytes + kHuge - 1) / kHuge * kHuge, MADV_HUGEPAGE);
  }
  uint8_t* data() const { return p; }
  size_t size() const { return n; }
};

struct Weights {
  std::string name;
  bool bf16 = false;
  quant::QType t = quant::QType::BF16;
  size_t mat_bytes = 0;
  int copies = 0;
  PageBuffer buf;
  const void* mat(int i) const { return buf.data() + size_t(i) * mat_bytes; }
};

void make_weights(Weights& w, const std::string& type, int N, int K, double gb, bool huge) {
  w.name = type;
  w.bf16 = type == "bf16";
  if (!w.bf16 && (!quant::qtype_parse(type.c_str(), &w.t) || !quant::qtype_is_quantized(w.t)))
    fail("--types: unknown block type '" + type + "'");
  if (!w.bf16 && K % quant::qtype_block(w.t) != 0)
    fail("--k " + std::to_string(K) + " is not a multiple of " + type + "'s block");
  std::vector<float> row(static_cast<size_t>(K));
  Philox r(7, 3);
  const size_t rb = w.bf16 ? size_t(K) * 2 : quant::qtype_row_bytes(w.t, K);
  w.mat_bytes = rb * size_t(N);
  w.copies = std::max(1, int(gb * 1e9 / double(w.mat_bytes)));
  w.buf.allocate(w.mat_bytes * size_t(w.copies), huge);
  for (int n = 0; n < N; ++n) {
    for (auto& v : row) v = float(r.normal()) * 0.02f;
    uint8_t* dst = w.buf.data() + size_t(n) * rb;
    if (w.bf16)
      convert_to_bf16(row.data(), reinterpret_cast<bf16*>(dst), size_t(K));
    else
      quant::quantize_row(w.t, row.data(), dst, K);
  }
  for (int c = 1; c < w.copies; ++c) std::memcpy(w.buf.data() + size_t(c) * w.mat_bytes, w.buf.data(), w.mat_bytes);
}

// Seconds of one pass over every copy.
double pass(const Weights& w, const std::vector<float>& x, std::vector<float>& y, int N, int K, int threads) {
  Timer t;
#pragma omp parallel num_threads(threads)
  for (int c = 0; c < w.copies; ++c) {
    if (w.bf16)
      linear_bf16_team(y.data(), N, x.data(), K, static_cast<const bf16*>(w.mat(c)), 1, N, K);
    else
      linear_quant_team(w.t, y.data(), N, x.data(), K, w.mat(c), 1, N, K);
#pragma omp barrier
  }
  return t.seconds();
}

// One token's attention per layer, the (batch row, KV head) pairs split over the threads as
// InferDecoder splits them; median over passes of us per layer.
void attention_bench(const std::vector<int>& ctxs, const std::vector<int>& threads, int passes) {
  const int Hq = 8, Hk = 2, hd = 128, QD = Hq * hd;
  std::printf("decode attention, %d query heads over %d KV heads of %d, one query row; median of %d passes\n", Hq, Hk,
              hd, passes);
  std::printf("%-6s %-9s %7s %7s %8s %10s %9s\n", "cache", "kernel", "ctx", "threads", "layers", "us/layer", "GB/s");
  for (const int ctx : ctxs) {
    AttnShape s{1, 1, ctx, ctx - 1, Hq, Hk, hd, QD, hd, hd, QD, ctx};
    s.kv_head_major = true;
    for (const bool b16 : {true, false}) {
      const size_t elems = size_t(Hk) * ctx * hd, bytes = 2 * elems * (b16 ? 2 : 4);
      const int layers = std::max(40, int((size_t(256) << 20) / bytes));
      Philox r(3, 1);
      std::vector<float> q(QD), out(QD), lse(Hq);
      for (auto& v : q) v = float(r.normal());
      std::vector<bf16> k16(b16 ? elems * layers : 0), v16(k16.size());
      std::vector<float> k32(b16 ? 0 : elems * layers), v32(k32.size());
      for (auto& v : k16) v = to_bf16(float(r.normal()));
      for (auto& v : v16) v = to_bf16(float(r.normal()));
      for (auto& v : k32) v = float(r.normal());
      for (auto& v : v32) v = float(r.normal());
      std::vector<std::string> done;  // each kernel this CPU has, once
      for (const KernelTier tier : {KernelTier::Auto, KernelTier::Avx2, KernelTier::Portable}) {
        attention_group_force(tier);
        const std::string kernel = attention_group_kernel(s, b16);
        if (std::find(done.begin(), done.end(), kernel) != done.end()) continue;
        done.push_back(kernel);
        for (const int th : threads) {
          std::vector<double> t;
          for (int p = 0; p <= passes; ++p) {
            Timer tm;
#pragma omp parallel num_threads(th)
            {
              std::vector<float> sc(s.scratch_per_thread());
              for (int l = 0; l < layers; ++l) {
#pragma omp for schedule(static)
                for (int g = 0; g < Hk; ++g) {
                  if (b16)
                    attention_group_kv_bf16(out.data(), lse.data(), q.data(), &k16[elems * l], &v16[elems * l], s, 0, g,
                                            sc.data());
                  else
                    attention_forward_group(out.data(), lse.data(), q.data(), &k32[elems * l], &v32[elems * l], s, 0, g,
                                            sc.data());
                }
              }
            }
            if (p) t.push_back(tm.seconds() / layers);  // pass 0 warms up
          }
          std::sort(t.begin(), t.end());
          const double sec = t[t.size() / 2];
          std::printf("%-6s %-9s %7d %7d %8d %10.2f %9.2f\n", b16 ? "bf16" : "fp32", kernel.c_str(),
                      ctx, th, layers, sec * 1e6, double(bytes) / sec / 1e9);
          std::fflush(stdout);
        }
      }
      attention_group_force(KernelTier::Auto);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int N = 16384, K = 2048, passes = 7;
    double gb = 1.0;
    bool huge = true;
    std::string threads_s = "1,2", types_s = "q8_0,q4_0,q4_k,q6_k,bf16", attention_s;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) fail(a + " needs a value");
        return argv[++i];
      };
      if (a == "--n") N = std::atoi(val().c_str());
      else if (a == "--k") K = std::atoi(val().c_str());
      else if (a == "--gb") gb = std::atof(val().c_str());
      else if (a == "--passes") passes = std::atoi(val().c_str());
      else if (a == "--threads") threads_s = val();
      else if (a == "--types") types_s = val();
      else if (a == "--attention") attention_s = val();
      else if (a == "--small-pages") huge = false;
      else if (a == "--kernel") {
        const std::string k = val();
        if (k == "auto") linear_quant_force(KernelTier::Auto);
        else if (k == "avx2") linear_quant_force(KernelTier::Avx2);
        else if (k == "portable") linear_quant_force(KernelTier::Portable);
        else fail("--kernel: '" + k + "' is not auto, avx2 or portable");
      } else fail("unknown argument '" + a + "' (--n --k --gb --passes --threads --types --small-pages --attention --kernel)");
    }
    if (N <= 0 || K <= 0 || passes <= 0 || gb <= 0) fail("--n, --k, --passes and --gb must be positive");
    std::vector<int> threads;
    for (const auto& s : split(threads_s)) threads.push_back(std::max(1, std::atoi(s.c_str())));
    if (!attention_s.empty()) {
      std::vector<int> ctxs;
      for (const auto& s : split(attention_s)) {
        ctxs.push_back(std::atoi(s.c_str()));
        if (ctxs.back() <= 0) fail("--attention: '" + s + "' is not a positive number of positions");
      }
      attention_bench(ctxs, threads, passes);
      return 0;
    }
    std::printf("decode products [1, %d] x [%d, %d]^T, %.2f GB of weights per pass in %s pages, median of %d passes; "
                "quant kernel %s, bf16 kernel %s\n",
                K, N, K, gb, huge ? "2 MB" : "malloc's", passes, linear_quant_kernel(), linear_bf16_kernel());
    std::vector<float> x(static_cast<size_t>(K)), y(static_cast<size_t>(N));
    Philox r(11, 5);
    for (auto& v : x) v = float(r.normal());
    std::printf("%-6s %7s %9s %10s %9s %9s %9s %9s %9s\n", "type", "threads", "B/weight", "GB/s", "ns/256w", "best ns",
                "triad", "vs triad", "vs read");
    for (const auto& type : split(types_s)) {
      Weights w;
      make_weights(w, type, N, K, gb, huge);
      const double bytes = double(w.mat_bytes) * w.copies;
      for (int th : threads) {
        const double triad = [&] {
          for (auto& k : bench::run_stream(int64_t(32) << 20, 5, th).kernels)
            if (k.name == "triad") return k.best_MBps / 1e3;
          return 0.0;
        }();
        const double readbw = bench::read_bandwidth_gbs({{w.buf.data(), w.buf.size()}}, th, 3);
        pass(w, x, y, N, K, th);  // warm-up
        std::vector<double> s;
        for (int p = 0; p < passes; ++p) s.push_back(pass(w, x, y, N, K, th));
        std::sort(s.begin(), s.end());
        const double sec = s[s.size() / 2], gbs = bytes / sec / 1e9;
        const double weights = double(N) * K * w.copies;
        std::printf("%-6s %7d %9.4f %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", type.c_str(), th,
                    double(w.mat_bytes) / (double(N) * K), gbs, sec * 1e9 * th / (weights / 256),
                    s.front() * 1e9 * th / (weights / 256), triad, gbs / triad, gbs / readbw);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
