// The step-time model by zones: one cost term per leaf zone of `zaya train-bench --profile`
// (core/profile.h), forward and backward, so a prediction can be held against the profiler
// zone by zone. Each term prices the kernels the trainer runs in that zone:
//   gemm       the zone's products at their layouts (nt forward, nn dgrad, tn wgrad), from the
//              measured kernel table (zaya bench kernels) at that shape, else the nearest
//              measured shape scaled by FLOPs, else the GEMM model (size/gemm_model.h);
//              products the trainer runs one per thread (experts, backward gradient pairs)
//              at their one-thread time beside the others (gemm1 rows);
//   attention  the fused causal attention kernel (attention_forward / attention_backward),
//              measured, scaled by its executed FLOPs (2 B Hq T^2 hd forward); a profile
//              without it: flash attention's two products on the GEMM model (backward 2.5x);
//   conv       CCA's two-stage causal conv kernel, measured, scaled by its FLOPs
//              (2 B T C (K0 + hd K1)); without it: the grouped stage as batched GEMMs plus the
//              depthwise stage's bytes;
//   bytes      elementwise work: bytes / the bandwidth zaya's kernels reach, or its exp / erf
//              evaluations at the measured rates, whichever is longer, plus one parallel
//              region per kernel launch; backward moves 2x the forward bytes (the loss:
//              cross_entropy_term, its own kernel's bytes and exps);
//   optimizer  AdamW at the measured rate per tensor size (else bandwidth-bound).
// zone_table() lists the zones; tests/test_size_zones.cpp runs the trainer with the profiler on
// and checks that its leaf zones are exactly these, so a kernel moved between zones (or a zone
// renamed) breaks the test, not silently the model.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "size/hardware.h"
#include "size/workload.h"

namespace zaya::size {

enum class ZoneTerm { Gemm, Attention, Conv, Bytes, Optimizer };
const char* zone_term_name(ZoneTerm t);

struct ZoneSpec {
  std::string path;  // the profiler's leaf zone, e.g. "forward/cca/attention"
  ZoneTerm term;     // the term that dominates it (GEMM zones also carry their elementwise bytes)
  // Only in a bf16 step whose weights' bf16 copy is stale (the first step: afterwards the
  // optimizer writes the copy in its own pass), so priced at 0 for a steady step.
  bool bf16_first_step = false;
};
// The profiler's leaf zones of one training step.
const std::vector<ZoneSpec>& zone_table();

struct ZoneCost {
  std::string path;
  ZoneTerm term;
  double seconds = 0;  // per optimizer step (grad_accum micro-batches), all layers
  std::string source;  // "measured", "scaled", "model": where the time came from
};

// The FLOPs a kernel executes at dims: GEMM M N K: 2 M N K; attention B T Hq Hk hd (causal,
// the masked half skipped): 2 B Hq T^2 hd; conv B T C hd K0 K1: 2 B T C (K0 + hd K1).
using KernelFlops = double (*)(const std::vector<double>& dims);
double gemm_kernel_flops(const std::vector<double>& d);
double attention_kernel_flops(const std::vector<double>& d);
double conv_kernel_flops(const std::vector<double>& d);

// One kernel's seconds: the measured row of `kind` at `dims` for `dtype`, else the nearest
// measured row of that kind (log distance over dims) scaled by flops(dims) / flops(its dims);
// -1 when the table has no row of that kind. `source` gets "measured" or "scaled".
double kernel_seconds(const HardwareProfile& hw, const std::string& dtype, const std::string& kind,
                      const std::vector<double>& dims, KernelFlops flops, std::string* source = nullptr);

// Terms (seconds of one call), each usable alone (the unit tests price constructed profiles).
// layout: "nt" | "nn" | "tn".
double gemm_term(const HardwareProfile& hw, const std::string& dtype, const std::string& layout, double M, double N,
                 double K, std::string* source = nullptr);
// B, T, Hq, Hk, hd; backward = true for the backward kernel.
double attention_term(const HardwareProfile& hw, const std::string& dtype, double B, double T, double Hq, double Hk,
                      double hd, bool backward, std::string* source = nullptr);
// B, T, C, hd, K0, K1.
double conv_term(const HardwareProfile& hw, const std::string& dtype, const std::vector<double>& dims, bool backward,
                 std::string* source = nullptr);
// Elementwise pass: bytes, exp / erf evaluations, kernel launches.
double bytes_term(const HardwareProfile& hw, double bytes, const SpecialCounts& special, double launches);

// The loss over [N, V] logits (kernels/loss.cpp): the logits' bytes and an exp per logit, each
// way (bf16: the forward also rounds the LM head's fp32 blocks into the bf16 logits).
double cross_entropy_term(const HardwareProfile& hw, const std::string& dtype, double N, double V, bool backward);

// Every zone's time for one optimizer step of `w` on `hw`.
std::vector<ZoneCost> predict_zones(const Workload& w, const HardwareProfile& hw);

// The kernel shapes predict_zones looks up, one `zaya bench kernels` line each.
std::vector<std::string> zone_kernel_shapes(const Workload& w);

nlohmann::json zones_to_json(const std::vector<ZoneCost>& z);

}  // namespace zaya::size
