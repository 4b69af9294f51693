// zaya bench kernels: the kernels a training step runs, at the shapes it runs them, timed in
// one process by bench/interleaved.h (rounds over all shapes in turn, the median per shape,
// disagreeing shapes measured again). What zaya size's step-time model prices its zones with:
//   gemm LAYOUT M N K      zaya::gemm as the layers call it (nt forward, nn dgrad, tn wgrad),
//                          with bf16 products: operands read from bf16 copies, as the trainer's
//                          weight and activation mirrors give them;
//   gemm1 LAYOUT M N K     the same product on one thread, every thread running its own copy
//                          at once: how the trainer runs its experts and gradient pairs
//                          (gemm_side_by_side); the time of one product;
//   attention B T Hq Hk hd attention_forward / attention_backward (CCA's causal GQA, its layout);
//   conv B T C hd K0 K1    causal_conv_forward / causal_conv_backward (CCA's two-stage conv).
// A shapes file holds one such line each (zaya size --kernel-shapes writes them); '#' comments.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "bench/interleaved.h"
#include "kernels/gemm.h"

namespace zaya::bench {

struct KernelShape {
  std::string kind;    // gemm | gemm1 | attention | conv
  std::string layout;  // gemm, gemm1: nt | nn | tn; else ""
  std::vector<int> dims;
  std::string dims_text() const;  // "512x4096x256"
};

// Parses one line ("gemm nt 512 4096 256"); `where` names the file and line in errors.
KernelShape parse_kernel_shape(const std::string& line, const std::string& where);
std::vector<KernelShape> read_kernel_shapes(const std::string& path);

struct KernelRow {
  std::string kind;    // gemm_nt, gemm_nn, gemm_tn, gemm1_nt/nn/tn, attention_fwd, attention_bwd, conv_fwd, conv_bwd
  std::string dtype;   // fp32 | bf16
  std::string engine;  // the GEMM engine (attention / conv: the engine of their products)
  std::string dims;
  double time_us = 0, spread = 0;
  int rounds = 0, remeasures = 0;
  bool flagged = false;
};

struct KernelBenchOptions {
  std::vector<KernelShape> shapes;
  GemmPrecision precision = GemmPrecision::F32;
  InterleavedOptions timing;
};

extern const char* const kKernelCsvHeader;
std::vector<KernelRow> run_kernel_bench(const KernelBenchOptions& o);
void write_kernel_csv(const std::vector<KernelRow>& rows, const std::string& path);
// The record beside the CSV: CPU model and flags, threads, dtype, rounds, the engine per shape.
void write_kernel_json(const std::vector<KernelRow>& rows, const KernelBenchOptions& o, const std::string& path);

}  // namespace zaya::bench
