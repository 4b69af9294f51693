#include "bench/kernels.h"

#include <omp.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "core/error.h"
#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/conv.h"

namespace zaya::bench {
using json = nlohmann::json;

const char* const kKernelCsvHeader = "kind,dtype,engine,dims,time_us,spread,rounds,remeasures,flagged";

std::string KernelShape::dims_text() const {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

KernelShape parse_kernel_shape(const std::string& line, const std::string& where) {
  std::istringstream in(line);
  KernelShape k;
  in >> k.kind;
  size_t want = 0;
  if (k.kind == "gemm" || k.kind == "gemm1") {
    in >> k.layout;
    if (k.layout != "nt" && k.layout != "nn" && k.layout != "tn")
      fail(where, ": gemm layout must be nt, nn or tn, got '", k.layout, "'");
    want = 3;
  } else if (k.kind == "attention") {
    want = 5;
  } else if (k.kind == "conv") {
    want = 6;
  } else {
    fail(where, ": kernel must be gemm, gemm1, attention or conv, got '", k.kind, "'");
  }
  std::string tok;
  while (in >> tok) {
    int64_t v = parse_size(tok, where);
    if (v < 1 || v > (1 << 24)) fail(where, ": dimension ", tok, " out of range [1, 16777216]");
    k.dims.push_back(int(v));
  }
  if (k.dims.size() != want) fail(where, ": ", k.kind, " takes ", want, " dimensions, got ", k.dims.size());
  if (k.kind == "attention" && k.dims[2] % k.dims[3] != 0)
    fail(where, ": attention query heads ", k.dims[2], " not a multiple of KV heads ", k.dims[3]);
  return k;
}

std::vector<KernelShape> read_kernel_shapes(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(path, ": cannot open");
  std::vector<KernelShape> out;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out.push_back(parse_kernel_shape(line, path + ":" + std::to_string(n)));
  }
  if (out.empty()) fail(path, ": no kernel shapes");
  return out;
}

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  Philox rng(seed, 3);
  for (auto& x : v) x = scale * (float(rng.uniform()) * 2.f - 1.f);
  return v;
}

// Buffers of one shape's kernels, alive for the whole measurement.
struct Buffers {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<bf16>> h;
  float* add(size_t n, uint64_t seed, float scale = 1.f) {
    f.push_back(random_floats(n, seed, scale));
    return f.back().data();
  }
};

void add_gemm(const KernelShape& k, bool bf, Buffers& b, std::vector<TimedItem>& items,
              std::vector<std::string>& kinds) {
  const int M = k.dims[0], N = k.dims[1], K = k.dims[2];
  const Trans ta = k.layout[0] == 't' ? Trans::T : Trans::N, tb = k.layout[1] == 't' ? Trans::T : Trans::N;
  const size_t na = size_t(M) * K, nb = size_t(K) * N;
  // gemm1: one product per thread, every thread at once (the trainer's experts and gradient
  // pairs, gemm_side_by_side): the time of one product beside the others. Each thread has
  // operands of its own, as each expert has its own weights and rows (one shared copy would
  // serve both threads from cache). Where products cannot run one per thread, the trainer
  // runs them in order on the team.
  const int P = k.kind == "gemm1" && omp_get_max_threads() > 1 && gemm_concurrent_ok() ? omp_get_max_threads() : 1;
  std::vector<float*> As, Bs, Cs;
  std::vector<Bf16Mirror> mirrors;
  for (int t = 0; t < P; ++t) {
    const uint64_t seed = 11 + 3 * uint64_t(t);
    As.push_back(b.add(na, seed));
    Bs.push_back(b.add(nb, seed + 1));
    Cs.push_back(b.add(size_t(M) * N, seed + 2));
    if (bf) {  // the trainer reads weights and most activations from bf16 copies made once
      for (auto [x, n] : {std::pair{As.back(), na}, {Bs.back(), nb}}) {
        b.h.emplace_back(n);
        convert_to_bf16(x, b.h.back().data(), n);
        mirrors.push_back({x, n, b.h.back().data(), 0});
      }
    }
  }
  const int lda = ta == Trans::N ? K : M, ldb = tb == Trans::N ? N : K;
  items.push_back({k.kind + " " + k.layout + " " + k.dims_text(), [=] {
                     std::vector<Bf16Mirror> prev = gemm_activation_mirrors();
                     if (!mirrors.empty()) gemm_set_activation_mirrors(mirrors);
                     if (P > 1) {
#pragma omp parallel num_threads(P)
                       {
                         const size_t t = size_t(omp_get_thread_num());
                         gemm(ta, tb, M, N, K, 1.f, As[t], lda, Bs[t], ldb, 0.f, Cs[t], N);
                       }
                     } else {
                       gemm(ta, tb, M, N, K, 1.f, As[0], lda, Bs[0], ldb, 0.f, Cs[0], N);
                     }
                     if (!mirrors.empty()) gemm_set_activation_mirrors(prev);
                   },
                   0});
  kinds.push_back(k.kind + "_" + k.layout);
}

void add_attention(const KernelShape& k, Buffers& b, std::vector<TimedItem>& items,
                   std::vector<std::string>& kinds) {
  const int B = k.dims[0], T = k.dims[1], Hq = k.dims[2], Hk = k.dims[3], hd = k.dims[4];
  // CCA's layout: q and k side by side in one row of C channels, v rows of Hk heads.
  const int C = (Hq + Hk) * hd, KD = Hk * hd, QD = Hq * hd;
  const size_t N = size_t(B) * T;
  const AttnShape as{B, T, T, 0, Hq, Hk, hd, C, C, KD, QD};
  float* qk = b.add(N * C, 21, 0.5f);
  float* v = b.add(N * KD, 22);
  float* out = b.add(N * QD, 23);
  float* lse = b.add(size_t(B) * Hq * T, 24);
  float* scratch = b.add(as.scratch_elems(omp_get_max_threads()), 25);
  float* dout = b.add(N * QD, 26);
  float* dqk = b.add(N * C, 27);
  float* dv = b.add(N * KD, 28);
  attention_forward(out, lse, qk, qk + QD, v, as, scratch);
  items.push_back({"attention fwd " + k.dims_text(), [=] { attention_forward(out, lse, qk, qk + QD, v, as, scratch); }, 0});
  kinds.push_back("attention_fwd");
  items.push_back({"attention bwd " + k.dims_text(),
                   [=] { attention_backward(dqk, dqk + QD, dv, dout, out, lse, qk, qk + QD, v, as, scratch); }, 0});
  kinds.push_back("attention_bwd");
}

void add_conv(const KernelShape& k, Buffers& b, std::vector<TimedItem>& items, std::vector<std::string>& kinds) {
  const ConvShape cs{k.dims[0], k.dims[1], k.dims[2], k.dims[3], k.dims[4], k.dims[5]};
  if (cs.C % cs.hd != 0) fail("conv ", k.dims_text(), ": channels not a multiple of the head dim");
  const size_t rows = size_t(cs.rows()), C = size_t(cs.C), N = size_t(cs.B) * cs.T;
  float* out = b.add(rows * C, 31);
  float* y0 = b.add(rows * C, 32);
  float* w1p = b.add(size_t(cs.K1) * C * cs.hd, 33);
  float* p = b.add(N * C, 34);
  float* w0 = b.add(C * cs.K0, 35, 0.3f);
  float* b0 = b.add(C, 36);
  float* w1 = b.add(C * cs.hd * cs.K1, 37, 0.1f);
  float* b1 = b.add(C, 38);
  float* dp = b.add(N * C, 39);
  float* dw0 = b.add(C * cs.K0, 40);
  float* db0 = b.add(C, 41);
  float* dw1 = b.add(C * cs.hd * cs.K1, 42);
  float* db1 = b.add(C, 43);
  float* dy0 = b.add(rows * C, 44);
  float* dw1p = b.add(size_t(cs.K1) * C * cs.hd, 45);
  float* dout = b.add(rows * C, 46);
  items.push_back({"conv fwd " + k.dims_text(),
                   [=] { causal_conv_forward(out, y0, w1p, p, (const float*)nullptr, w0, b0, w1, b1, cs); }, 0});
  kinds.push_back("conv_fwd");
  items.push_back({"conv bwd " + k.dims_text(), [=] {
                     causal_conv_backward(dp, (float*)nullptr, dw0, db0, dw1, db1, dy0, dw1p, dout, y0, w1p, w1, p,
                                          (const float*)nullptr, w0, cs);
                   },
                   0});
  kinds.push_back("conv_bwd");
}

}  // namespace

std::vector<KernelRow> run_kernel_bench(const KernelBenchOptions& o) {
  if (o.shapes.empty()) fail("zaya bench kernels: no shapes");
  const bool bf = o.precision == GemmPrecision::BF16;
  if (bf && !bf16_gemm_supported()) fail("--dtype bf16: this CPU has no bf16 GEMM (AVX512-BF16 or AMX)");
  const GemmSettings saved = gemm_settings();
  gemm_settings().precision = o.precision;
  std::vector<std::unique_ptr<Buffers>> bufs;
  std::vector<TimedItem> items;
  std::vector<std::string> kinds, dims;
  for (const KernelShape& k : o.shapes) {
    bufs.push_back(std::make_unique<Buffers>());
    const size_t before = items.size();
    if (k.kind == "gemm" || k.kind == "gemm1") add_gemm(k, bf, *bufs.back(), items, kinds);
    else if (k.kind == "attention") add_attention(k, *bufs.back(), items, kinds);
    else add_conv(k, *bufs.back(), items, kinds);
    for (size_t i = before; i < items.size(); ++i) dims.push_back(k.dims_text());
  }
  const std::vector<ItemTiming> t = measure_interleaved(std::move(items), o.timing);
  std::vector<KernelRow> rows;
  size_t shape = 0, i = 0;
  for (const KernelShape& k : o.shapes) {
    const bool product = k.kind == "gemm" || k.kind == "gemm1";
    const int n = product ? 1 : 2;
    GemmEngine e = gemm_resolve(o.precision);
    if (product)
      e = gemm_engine_for(GemmEngine::Auto, o.precision, k.layout[0] == 't' ? Trans::T : Trans::N, k.dims[0],
                          k.dims[1], k.dims[2]);
    for (int j = 0; j < n; ++j, ++i) {
      KernelRow r;
      r.kind = kinds[i];
      r.dtype = bf ? "bf16" : "fp32";
      r.engine = gemm_engine_name(e);
      r.dims = dims[i];
      r.time_us = t[i].seconds * 1e6;
      r.spread = t[i].spread;
      r.rounds = int(t[i].rounds.size());
      r.remeasures = t[i].remeasures;
      r.flagged = t[i].flagged;
      rows.push_back(r);
    }
    ++shape;
  }
  gemm_settings() = saved;
  return rows;
}

void write_kernel_csv(const std::vector<KernelRow>& rows, const std::string& path) {
  CsvWriter w(path, kKernelCsvHeader);
  for (const KernelRow& r : rows)
    w.row({r.kind, r.dtype, r.engine, r.dims, fmt(r.time_us, 3), fmt(r.spread, 3), std::to_string(r.rounds),
           std::to_string(r.remeasures), r.flagged ? "1" : "0"});
}

namespace {
// The ISA flags of /proc/cpuinfo that pick kernels (avx*, amx*, fma, f16c).
std::vector<std::string> isa_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> out;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream in(line.substr(line.find(':') + 1));
    std::string w;
    while (in >> w)
      if (w.rfind("avx", 0) == 0 || w.rfind("amx", 0) == 0 || w == "fma" || w == "f16c") out.push_back(w);
    break;
  }
  return out;
}
}  // namespace

void write_kernel_json(const std::vector<KernelRow>& rows, const KernelBenchOptions& o, const std::string& path) {
  json shapes = json::array();
  for (const KernelRow& r : rows)
    shapes.push_back({{"kind", r.kind}, {"dims", r.dims}, {"engine", r.engine}, {"time_us", r.time_us},
                      {"spread", r.spread}, {"remeasures", r.remeasures}, {"flagged", r.flagged}});
  write_json_file(path, {{"cpu_model", cpu_info().model},
                         {"cpu_flags", isa_flags()},
                         {"threads", omp_get_max_threads()},
                         {"dtype", o.precision == GemmPrecision::BF16 ? "bf16" : "fp32"},
                         {"rounds", o.timing.rounds},
                         {"spread_limit", o.timing.spread_limit},
                         {"runtime", gemm_runtime_info()},
                         {"shapes", shapes}});
}

}  // namespace zaya::bench
