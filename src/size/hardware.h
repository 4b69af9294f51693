// Hardware profiles for `zaya size`: what a device offers (peak FLOP/s per dtype, memory
// size and bandwidth, compute units, the GEMM tiles its libraries use) and what links it
// (intra-node and inter-node bandwidth and latency). A profile comes from a TOML file
// (configs/hardware/*.toml, vendor figures plus stated assumptions) or is built from
// measurements (`zaya bench` CSVs, nccl-tests / rccl-tests output; see measured.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "size/elementwise.h"

namespace zaya::size {

// One GEMM macro-tile the device's BLAS library picks from; `efficiency` is the fraction of
// the large-GEMM efficiency a kernel with this tile reaches (smaller tiles reuse less).
struct GemmTile {
  int m = 0, n = 0, k = 0;
  double efficiency = 1.0;
};

// A link class, as nccl-tests bus bandwidth: per device, one direction.
struct LinkProfile {
  double bandwidth_GBps = 0;  // GB/s = 1e9 B/s
  double latency_us = 0;      // per ring step (alpha)
};

// One row of a measured GEMM table (zaya bench gemm).
struct MeasuredGemm {
  std::string dtype, engine;
  double M = 0, N = 0, K = 0;
  double time_us = 0, tflops = 0;
};

// One row of a measured kernel table (zaya bench kernels: kernels-<dtype>.csv): the trainer's
// kernel `kind` (gemm_nt, gemm_nn, gemm_tn, attention_fwd/bwd, conv_fwd/bwd) at `dims`.
struct MeasuredKernel {
  std::string kind, dtype, engine;
  std::vector<double> dims;
  double time_us = 0;
};

// One row of a measured collective table (zaya bench comm, or nccl-tests text).
struct MeasuredCollective {
  std::string op;  // all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, ...
  int nranks = 0;
  double size_bytes = 0;
  double time_us = 0;
  double busbw_GBps = 0;
  bool inter_node = false;
};

struct HardwareProfile {
  std::string name;
  std::string kind = "gpu";  // gpu | cpu
  std::string source;        // the file or directory it came from
  // Compute.
  std::map<std::string, double> peak_tflops;  // dtype -> dense peak TFLOP/s
  int compute_units = 0;                      // CUs (AMD), SMs (NVIDIA), cores (CPU)
  double gemm_efficiency = 0;                 // fraction of peak a large, aligned GEMM reaches
  std::vector<GemmTile> tiles;
  int width_multiple = 64;                    // preferred granularity for hidden / FFN widths
  double kernel_overhead_us = 0;              // fixed cost per kernel launch / parallel region
  ElementwiseRates elementwise;               // exp / erf rates (0: not a bottleneck)
  // Memory.
  double memory_GB = 0;  // device memory capacity (0: unknown)
  double memory_bandwidth_GBps = 0;
  double memory_efficiency = 1.0;  // achievable fraction of memory_bandwidth_GBps
  double cache_MB = 0;
  // Network.
  int devices_per_node = 1;
  LinkProfile intra, inter;
  // Measured tables (empty for a vendor profile).
  std::vector<MeasuredGemm> gemm_table;
  std::vector<MeasuredCollective> comm_table;
  std::vector<MeasuredKernel> kernel_table;  // prices the step-time model's zones (size/zones.h)
  std::string network_source;  // where the network part came from

  double peak(const std::string& dtype) const;  // FLOP/s; fails naming the dtype if absent
  double achievable_bandwidth() const { return memory_bandwidth_GBps * 1e9 * memory_efficiency; }  // B/s
  bool measured_gemms() const { return !gemm_table.empty(); }
  void validate() const;  // fails naming the field
};

HardwareProfile load_hardware_profile(const std::string& path);
HardwareProfile parse_hardware_profile(const std::string& text, const std::string& path);
std::string hardware_profile_to_toml(const HardwareProfile& hw);
nlohmann::json hardware_profile_to_json(const HardwareProfile& hw);

// Bytes per element of a training/inference dtype name (bf16, fp16, fp32, fp8).
int dtype_bytes(const std::string& dtype);

}  // namespace zaya::size
