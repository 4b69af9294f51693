// The decode products alone, per weight format: y[1, N] = x[1, K] W[N, K]^T over enough
// copies of one [N, K] matrix that a pass reads far more than the last-level cache (as a
// decode step streams its weights from memory), every thread taking its share of each matrix
// in one OpenMP region with a barrier after each (as InferDecoder runs them). Prints GB/s of
// weight bytes, ns per 256 weights per thread, and the ratio to the STREAM triad and to the
// read-only bandwidth of the same buffer measured in the same run; `best ns` (the fastest
// pass) is the figure to compare kernels by on a shared machine.
//   bench_quant_kernels [--n N] [--k K] [--gb GB] [--passes P] [--threads 1,2] [--types q8_0,q4_0,q4_k,q6_k,bf16]
#include <omp.h>

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

struct Weights {
  std::string name;
  bool bf16 = false;
  quant::QType t = quant::QType::BF16;
  size_t mat_bytes = 0;
  int copies = 0;
  std::vector<uint8_t> buf;  // `copies` matrices back to back
  const void* mat(int i) const { return buf.data() + size_t(i) * mat_bytes; }
};

Weights make_weights(const std::string& type, int N, int K, double gb) {
  Weights w;
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
  w.buf.resize(w.mat_bytes * size_t(w.copies));
  for (int n = 0; n < N; ++n) {
    for (auto& v : row) v = float(r.normal()) * 0.02f;
    uint8_t* dst = w.buf.data() + size_t(n) * rb;
    if (w.bf16)
      convert_to_bf16(row.data(), reinterpret_cast<bf16*>(dst), size_t(K));
    else
      quant::quantize_row(w.t, row.data(), dst, K);
  }
  for (int c = 1; c < w.copies; ++c) std::memcpy(w.buf.data() + size_t(c) * w.mat_bytes, w.buf.data(), w.mat_bytes);
  return w;
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

}  // namespace

int main(int argc, char** argv) {
  try {
    int N = 16384, K = 2048, passes = 7;
    double gb = 1.0;
    std::string threads_s = "1,2", types_s = "q8_0,q4_0,q4_k,q6_k,bf16";
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
      else fail("unknown argument '" + a + "' (--n --k --gb --passes --threads --types)");
    }
    if (N <= 0 || K <= 0 || passes <= 0 || gb <= 0) fail("--n, --k, --passes and --gb must be positive");
    std::vector<int> threads;
    for (const auto& s : split(threads_s)) threads.push_back(std::max(1, std::atoi(s.c_str())));
    std::printf("decode products [1, %d] x [%d, %d]^T, %.2f GB of weights per pass, median of %d passes; "
                "quant kernel %s, bf16 kernel %s\n",
                K, N, K, gb, passes, linear_quant_kernel(), linear_bf16_kernel());
    std::vector<float> x(static_cast<size_t>(K)), y(static_cast<size_t>(N));
    Philox r(11, 5);
    for (auto& v : x) v = float(r.normal());
    std::printf("%-6s %7s %9s %10s %9s %9s %9s %9s %9s\n", "type", "threads", "B/weight", "GB/s", "ns/256w", "best ns",
                "triad", "vs triad", "vs read");
    for (const auto& type : split(types_s)) {
      const Weights w = make_weights(type, N, K, gb);
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
