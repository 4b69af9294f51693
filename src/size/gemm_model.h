// Time of one GEMM on a profile. A vendor profile uses the tile- and wave-quantisation model
// (Anthony et al. 2024): for each macro-tile the library offers, the output is cut into
// ceil(M/tm) * ceil(N/tn) tiles per product (times `batch` products), the tiles run in waves
// of `compute_units`, and the efficiency is
//     gemm_efficiency * tile_efficiency * (M N / padded M N) * (tiles / (waves * CUs)) * (K / padded K);
// the time is max(FLOPs / (peak * efficiency), bytes / bandwidth) plus the kernel overhead,
// minimised over tiles and split-K factors (a GEMM with too few output tiles to fill the
// device splits K into chunks that run as extra tiles, paying for fp32 partial sums). A measured profile interpolates the measured GEMM table instead
// (inverse-distance weighting of log TFLOP/s over log M, N, K; the roofline bound still applies).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "size/hardware.h"

namespace zaya::size {

struct GemmShape {
  double M = 0, N = 0, K = 0, batch = 1;
  double bytes = 0;  // memory traffic for the roofline; 0: (M K + K N + M N) * batch * dtype bytes
};

struct GemmTiming {
  double seconds = 0;      // one call (all `batch` products), including kernel overhead
  double efficiency = 0;   // achieved fraction of the dtype's peak on the executed FLOPs
  double tile_quant = 1;   // M N / padded M N (1 for a measured table)
  double wave_quant = 1;   // tiles / (waves * compute units)
  double waves = 0;
  double tiles = 0;
  double split_k = 1;      // reduction split (split-K) chosen
  GemmTile tile;           // the tile chosen (vendor model)
  bool memory_bound = false;
  bool from_table = false;
};

// `executed` scales the work the kernel does relative to 2*M*N*K*batch (0.5 for a causal
// attention kernel that skips the masked half).
GemmTiming gemm_time(const HardwareProfile& hw, const std::string& dtype, const GemmShape& g, double executed = 1.0);

// Wave quantisation alone, for the rule checks: tiles of the profile's largest tile.
struct WaveInfo {
  double tiles = 0, waves = 0, efficiency = 1;
  GemmTile tile;
};
WaveInfo wave_quantisation(const HardwareProfile& hw, const GemmShape& g);

nlohmann::json gemm_timing_to_json(const GemmTiming& t);

}  // namespace zaya::size
