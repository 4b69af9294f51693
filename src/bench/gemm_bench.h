// zaya bench gemm: GEMM throughput over shapes (value lists, ranges, or transformer-shaped
// presets from a model config), in fp32 and bf16, through zaya::gemm_with (the trainer's
// path). Reports time, TFLOP/s, efficiency against the machine's peak, and the maximum
// achievable FLOP/s found (as mamf-finder does).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "model/config.h"

namespace zaya::bench {

struct GemmShape {
  std::string name;  // "" for sweep points, else e.g. "q_proj"
  int64_t M = 0, N = 0, K = 0;
  double flops() const { return 2.0 * double(M) * double(N) * double(K); }
};

std::vector<GemmShape> cartesian_shapes(const std::vector<int64_t>& Ms, const std::vector<int64_t>& Ns,
                                        const std::vector<int64_t>& Ks);

// Forward GEMMs of one layer of a ZAYA1 model (weights [out, in]: M = tokens, N = out, K = in).
struct PresetOptions {
  int64_t tokens = 1024;            // b x s per microbatch
  int64_t seq = 1024;               // sequence length for the attention-score GEMMs
  int64_t tokens_per_expert = 0;    // 0: tokens x top-k / E, rounded up
};
std::vector<GemmShape> transformer_shapes(const ModelConfig& cfg, const PresetOptions& p);

// The shapes searched by --peak when none are given (square, large enough to saturate).
std::vector<GemmShape> peak_search_shapes();

struct GemmOptions {
  std::vector<GemmShape> shapes;
  std::vector<GemmPrecision> precisions{GemmPrecision::F32, GemmPrecision::BF16};
  std::vector<GemmEngine> engines{GemmEngine::Auto};
  Trans ta = Trans::N, tb = Trans::T;  // default "nt": activations [M,K] times weights [N,K]^T
  int warmup = 1;
  int min_iters = 2;
  double min_time = 0.2;            // seconds of timed calls per shape (at least min_iters)
  double peak_fp32 = 0, peak_bf16 = 0;  // TFLOP/s for the efficiency column; 0: nominal from the CPU
  int threads = 0;                  // 0: OpenMP default
  bool verify = true;               // sampled check of C against a double-precision dot product
  std::string csv, json;
  void validate() const;
};

struct GemmRow {
  std::string name, dtype, engine;
  int64_t M = 0, N = 0, K = 0;
  double time_us = 0, tflops = 0, efficiency = 0;
};

struct GemmBest {
  std::string dtype;
  double tflops = 0;
  GemmRow at;
  double peak = 0;          // TFLOP/s the efficiency is against
  std::string peak_source;  // "nominal", "flag", "measured max"
};

struct GemmResult {
  std::vector<GemmRow> rows;
  std::vector<GemmBest> best;  // one per precision
};

extern const char* const kGemmCsvHeader;
std::vector<std::string> gemm_csv_cells(const GemmRow& r);

// Times one shape; returns seconds per call (mean over the timed calls).
double time_gemm(GemmEngine e, GemmPrecision p, Trans ta, Trans tb, const GemmShape& s, int warmup, int min_iters,
                 double min_time, bool verify);
// "nn", "nt", "tn", "tt" (op(A), op(B)).
void parse_layout(const std::string& s, Trans& ta, Trans& tb);
GemmPrecision parse_precision(const std::string& s);
GemmEngine parse_engine(const std::string& s);

GemmResult run_gemm(const GemmOptions& o, std::FILE* out);

}  // namespace zaya::bench
