// zaya bench mem: STREAM (McCalpin) copy, scale, add, triad on double arrays, OpenMP, with
// STREAM's byte counting (copy/scale 16 B, add/triad 24 B per element), best/avg/min rate in
// MB/s (1e6 B/s) over NTIMES passes skipping the first, and STREAM's validation of the
// array contents. Plus a bandwidth-vs-working-set sweep from L1 to DRAM.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace zaya::bench {

struct StreamKernel {
  std::string name;        // copy, scale, add, triad
  int threads = 0;
  int64_t array_bytes = 0;  // bytes of one array
  double best_MBps = 0, avg_MBps = 0, min_MBps = 0;
  double avg_time = 0, min_time = 0, max_time = 0;  // seconds
};

struct StreamRun {
  std::vector<StreamKernel> kernels;  // copy, scale, add, triad
  bool valid = false;
  std::string validation;  // STREAM's message
};

// Bytes STREAM counts per element for a kernel (16 for copy/scale, 24 for add/triad).
int stream_bytes_per_element(const std::string& kernel);

// STREAM's check: replays the kernels on scalars and compares the average absolute error of
// each array with epsilon 1e-13 (doubles). `ntimes` passes with scalar 3.
bool stream_validate(const double* a, const double* b, const double* c, int64_t n, int ntimes, std::string& msg);

// One STREAM run: n elements per array, ntimes passes (>= 2), threads (0: OpenMP default).
// `corrupt` (debug/tests) damages one element of `a` before validation.
StreamRun run_stream(int64_t n, int ntimes, int threads, bool corrupt = false);

// Read-only bandwidth in GB/s (1e9 B/s) over `ranges` (e.g. memory-mapped weights): a pass
// sums every 8-byte word, the threads splitting each range; best of `passes` after one
// warm-up pass. What a weight-streaming kernel can hope for on these very pages.
double read_bandwidth_gbs(const std::vector<std::pair<const void*, size_t>>& ranges, int threads, int passes);

struct SweepPoint {
  int64_t array_bytes = 0, working_set = 0;
  double best_MBps = 0, avg_MBps = 0, min_MBps = 0;
};
// Triad bandwidth for working sets from `min_ws` to `max_ws` bytes (x2 steps); each point
// repeats the kernel in one parallel region until >= `min_time` seconds, best of 5.
std::vector<SweepPoint> stream_sweep(int64_t min_ws, int64_t max_ws, int threads, double min_time);

struct MemOptions {
  int threads = 0;
  int64_t array_bytes = 0;  // 0: 4 x last-level cache
  int64_t llc_bytes = 0;    // 0: read from the machine
  int ntimes = 10;
  std::string csv, json, peak_json;
  bool sweep = false;
  int64_t sweep_min = 0, sweep_max = 0;  // 0: L1 / 2 and 4 x LLC (working set, bytes)
  double sweep_time = 0.02;
  std::string sweep_csv, sweep_plot;
  bool debug_corrupt = false;
  void validate() const;
};

extern const char* const kMemCsvHeader;
// Runs STREAM (and the sweep when asked), prints STREAM's table, writes the files. Returns
// the run; throws zaya::Error when validation fails.
StreamRun run_mem(const MemOptions& o, std::FILE* out);

}  // namespace zaya::bench
