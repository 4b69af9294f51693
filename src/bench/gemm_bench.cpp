#include "bench/gemm_bench.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

#include <cblas.h>
#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"

namespace zaya::bench {

const char* const kGemmCsvHeader = "dtype,engine,M,N,K,time_us,tflops,efficiency";

std::vector<std::string> gemm_csv_cells(const GemmRow& r) {
  return {r.dtype, r.engine, std::to_string(r.M), std::to_string(r.N), std::to_string(r.K),
          fmt(r.time_us, 3), fmt(r.tflops, 6), fmt(r.efficiency, 4)};
}

std::vector<GemmShape> cartesian_shapes(const std::vector<int64_t>& Ms, const std::vector<int64_t>& Ns,
                                        const std::vector<int64_t>& Ks) {
  std::vector<GemmShape> v;
  for (int64_t k : Ks)
    for (int64_t m : Ms)
      for (int64_t n : Ns) v.push_back({"", m, n, k});
  return v;
}

std::vector<GemmShape> transformer_shapes(const ModelConfig& c, const PresetOptions& p) {
  if (p.tokens <= 0) fail("--tokens must be positive (got ", p.tokens, ")");
  if (p.seq <= 0) fail("--seq must be positive (got ", p.seq, ")");
  if (p.tokens_per_expert < 0) fail("--tokens-per-expert must be >= 0 (got ", p.tokens_per_expert, ")");
  const int64_t T = p.tokens, D = c.hidden_size, hd = c.head_dim, Hq = c.num_q_heads, Hk = c.num_kv_heads;
  const int64_t E = c.num_experts, F = c.ffn_hidden_size, R = c.router_hidden, V = c.vocab_size;
  int64_t tpe = p.tokens_per_expert;
  if (tpe == 0) tpe = E > 0 ? (T * c.topk + E - 1) / E : T;
  std::vector<GemmShape> v = {
      {"q_proj", T, Hq * hd, D},
      {"k_proj", T, Hk * hd, D},
      {"v_proj (val_proj1/2)", T, Hk * hd / 2, D},
      {"o_proj", T, D, Hq * hd},
      {"attn_scores (per head)", p.seq, p.seq, hd},
      {"attn_context (per head)", p.seq, hd, p.seq},
      {"expert_fc1", tpe, F, D},
      {"expert_fc2", tpe, D, F / 2},
      {"router_down_proj", T, R, D},
      {"router_mlp (0, 2)", T, R, R},
      {"router_mlp_out", T, E + (c.use_mod ? 1 : 0), R},
      {"lm_head", T, V, D},
  };
  for (const auto& s : v)
    if (s.M <= 0 || s.N <= 0 || s.K <= 0) fail("model config '", c.name, "' gives an empty GEMM for ", s.name);
  return v;
}

std::vector<GemmShape> peak_search_shapes() {
  std::vector<GemmShape> v;
  for (int64_t s : {512, 1024, 2048, 3072, 4096}) v.push_back({"square", s, s, s});
  v.push_back({"tall", 8192, 2048, 2048});
  return v;
}

GemmPrecision parse_precision(const std::string& s) {
  if (s == "fp32" || s == "float" || s == "float32") return GemmPrecision::F32;
  if (s == "bf16" || s == "bfloat16") return GemmPrecision::BF16;
  fail("--dtype '", s, "': expected fp32 or bf16");
}

GemmEngine parse_engine(const std::string& s) {
  if (s == "auto") return GemmEngine::Auto;
  if (s == "openblas") return GemmEngine::OpenBLAS;
  if (s == "onednn") return GemmEngine::OneDNN;
  if (s == "amx") return GemmEngine::Amx;
  if (s == "avx512") return GemmEngine::Avx512;
  fail("--engine '", s, "': expected auto, openblas, onednn, amx or avx512");
}

void parse_layout(const std::string& s, Trans& ta, Trans& tb) {
  if (s.size() != 2 || (s[0] != 'n' && s[0] != 't') || (s[1] != 'n' && s[1] != 't'))
    fail("--layout '", s, "': expected nn, nt, tn or tt");
  ta = s[0] == 'n' ? Trans::N : Trans::T;
  tb = s[1] == 'n' ? Trans::N : Trans::T;
}

void GemmOptions::validate() const {
  if (shapes.empty()) fail("no GEMM shapes to run");
  if (precisions.empty()) fail("--dtype: nothing selected");
  if (engines.empty()) fail("--engine: nothing selected");
  if (warmup < 0) fail("--warmup must be >= 0");
  if (min_iters < 1) fail("--min-iters must be >= 1");
  if (min_time < 0) fail("--min-time must be >= 0");
  if (peak_fp32 < 0 || peak_bf16 < 0) fail("--peak-fp32/--peak-bf16 must be >= 0");
  if (threads < 0) fail("--threads must be >= 0");
  for (const auto& s : shapes) {
    if (s.M <= 0 || s.N <= 0 || s.K <= 0) fail("GEMM shape ", s.M, "x", s.N, "x", s.K, ": dimensions must be positive");
    if (s.M > INT_MAX || s.N > INT_MAX || s.K > INT_MAX) fail("GEMM shape ", s.M, "x", s.N, "x", s.K, ": too large for BLAS ints");
    double bytes = 4.0 * (double(s.M) * s.K + double(s.K) * s.N + double(s.M) * s.N);
    if (bytes > 64.0 * (1ull << 30)) fail("GEMM shape ", s.M, "x", s.N, "x", s.K, " needs ", bytes / (1ull << 30), " GiB");
  }
}

namespace {

void fill_random(std::vector<float>& v, uint64_t seed) {
  const int64_t n = int64_t(v.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(double(splitmix64(seed + uint64_t(i)) >> 40) * 0x1.0p-24 - 0.5);
}

float operand(const std::vector<float>& X, Trans t, int64_t r, int64_t c, int64_t rows, int64_t cols, bool bf) {
  // element (r, c) of op(X) where op(X) is rows x cols, stored row-major as X or X^T
  float x = t == Trans::N ? X[size_t(r * cols + c)] : X[size_t(c * rows + r)];
  return bf ? from_bf16(to_bf16(x)) : x;
}

}  // namespace

double time_gemm(GemmEngine e, GemmPrecision p, Trans ta, Trans tb, const GemmShape& s, int warmup, int min_iters,
                 double min_time, bool verify) {
  const int M = int(s.M), N = int(s.N), K = int(s.K);
  std::vector<float> A(size_t(s.M * s.K)), B(size_t(s.K * s.N)), C(size_t(s.M * s.N), 0.f);
  fill_random(A, 0xA11CEull);
  fill_random(B, 0xB0Bull);
  const int lda = ta == Trans::N ? K : M, ldb = tb == Trans::N ? N : K;
  auto call = [&] { gemm_with(e, p, ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C.data(), N); };
  for (int i = 0; i < warmup; ++i) call();
  Timer t;
  call();
  double first = t.seconds();
  int more = std::max(min_iters - 1, int(std::ceil((min_time - first) / std::max(first, 1e-9))));
  more = std::max(more, 0);
  for (int i = 0; i < more; ++i) call();
  double per_call = t.seconds() / (1 + more);
  if (verify) {  // sampled check against a double-precision dot product of the same operands
    bool bf = p == GemmPrecision::BF16 && bf16_gemm_supported();
    Philox rng(7, uint64_t(M) * 31 + uint64_t(N) * 17 + uint64_t(K));
    for (int q = 0; q < 16; ++q) {
      int64_t i = int64_t(rng.below(uint64_t(M))), j = int64_t(rng.below(uint64_t(N)));
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = operand(A, ta, i, k, M, K, bf), b = operand(B, tb, k, j, K, N, bf);
        ref += a * b;
        mag += std::fabs(a * b);
      }
      double got = C[size_t(i * N + j)], tol = 1e-4 * mag + 1e-6;
      if (!(std::fabs(got - ref) <= tol))
        fail("GEMM ", gemm_precision_name(p), " ", gemm_engine_name(e), " ", M, "x", N, "x", K, ": C[", i, ",", j, "] = ", got,
             ", expected ", ref, " (engine gives wrong results)");
    }
  }
  return per_call;
}

GemmResult run_gemm(const GemmOptions& o, std::FILE* out) {
  o.validate();
  if (o.threads > 0) {
    omp_set_num_threads(o.threads);
    openblas_set_num_threads(o.threads);
  }
  const CpuInfo& cpu = cpu_info();
  GemmResult res;
  std::fprintf(out, "# zaya bench gemm: %s\n", gemm_runtime_info().c_str());
  std::fprintf(out, "# cpu: %s, %d cores, %.3f GHz (%s); %s\n", cpu.model.c_str(), cpu.cores, cpu.ghz,
               cpu.ghz_source.c_str(), cpu.flops_note.c_str());
  std::fprintf(out, "# layout %c%c (op(A) [M,K] x op(B) [K,N]); time: mean per call over >= %d calls and >= %.2f s\n",
               o.ta == Trans::N ? 'n' : 't', o.tb == Trans::N ? 'n' : 't', o.min_iters, o.min_time);
  CsvWriter csv(o.csv, kGemmCsvHeader);
  for (GemmPrecision p : o.precisions) {
    bool bf = p == GemmPrecision::BF16;
    GemmBest best;
    best.dtype = gemm_precision_name(p);
    double flag = bf ? o.peak_bf16 : o.peak_fp32, nominal = cpu.nominal_tflops(bf);
    if (bf && !bf16_gemm_supported()) nominal = cpu.nominal_tflops(false);
    best.peak = flag > 0 ? flag : nominal;
    best.peak_source = flag > 0 ? "flag" : nominal > 0 ? "nominal" : "measured max";
    std::fprintf(out, "#\n# %s: efficiency vs %s peak %.4f TFLOP/s\n", best.dtype.c_str(), best.peak_source.c_str(),
                 best.peak);
    std::fprintf(out, "# %-24s %6s %8s %8s %8s %12s %9s %6s\n", "shape", "engine", "M", "N", "K", "time (us)", "TFLOP/s",
                 "eff");
    size_t first_row = res.rows.size();
    std::set<std::tuple<GemmEngine, int64_t, int64_t, int64_t>> done;  // an engine runs a shape once
    for (GemmEngine e : o.engines) {
      for (const GemmShape& s : o.shapes) {
        const GemmEngine used = gemm_engine_for(e, p, o.ta, int(s.M), int(s.N), int(s.K));
        if (!done.insert({used, s.M, s.N, s.K}).second) continue;
        double sec = time_gemm(e, p, o.ta, o.tb, s, o.warmup, o.min_iters, o.min_time, o.verify);
        GemmRow r{s.name, best.dtype, gemm_engine_name(used), s.M, s.N, s.K, sec * 1e6, s.flops() / sec / 1e12, 0};
        res.rows.push_back(r);
        if (r.tflops > best.tflops) {
          best.tflops = r.tflops;
          best.at = r;
        }
      }
    }
    if (best.peak <= 0) best.peak = best.tflops;  // no nominal figure: efficiency vs the measured maximum
    for (size_t i = first_row; i < res.rows.size(); ++i) {
      GemmRow& r = res.rows[i];
      r.efficiency = best.peak > 0 ? r.tflops / best.peak : 0;
      std::fprintf(out, "  %-24s %6s %8lld %8lld %8lld %12.1f %9.4f %6.3f\n", r.name.empty() ? "-" : r.name.c_str(),
                   r.engine.c_str(), (long long)r.M, (long long)r.N, (long long)r.K, r.time_us, r.tflops, r.efficiency);
      csv.row(gemm_csv_cells(r));
    }
    std::fprintf(out, "# The best outcome was %.4f TFLOP/s %s @ %lldx%lldx%lld (MxNxK, %s), %.1f%% of the %s peak\n",
                 best.tflops, best.dtype.c_str(), (long long)best.at.M, (long long)best.at.N, (long long)best.at.K,
                 best.at.engine.c_str(), 100 * best.tflops / std::max(best.peak, 1e-12), best.peak_source.c_str());
    res.best.push_back(best);
  }
  if (!o.json.empty()) {
    nlohmann::json j;
    j["runtime"] = gemm_runtime_info();
    j["cpu"] = {{"model", cpu.model}, {"cores", cpu.cores}, {"ghz", cpu.ghz}, {"ghz_source", cpu.ghz_source},
                {"fp32_flops_per_cycle", cpu.fp32_flops_per_cycle}, {"bf16_flops_per_cycle", cpu.bf16_flops_per_cycle}};
    j["rows"] = nlohmann::json::array();
    for (const auto& r : res.rows)
      j["rows"].push_back({{"name", r.name}, {"dtype", r.dtype}, {"engine", r.engine}, {"M", r.M}, {"N", r.N},
                           {"K", r.K}, {"time_us", r.time_us}, {"tflops", r.tflops}, {"efficiency", r.efficiency}});
    j["best"] = nlohmann::json::object();
    for (const auto& b : res.best)
      j["best"][b.dtype] = {{"tflops", b.tflops}, {"M", b.at.M}, {"N", b.at.N}, {"K", b.at.K}, {"engine", b.at.engine},
                            {"peak_tflops", b.peak}, {"peak_source", b.peak_source}};
    write_json_file(o.json, j);
  }
  return res;
}

}  // namespace zaya::bench
