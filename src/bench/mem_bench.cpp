#include "bench/mem_bench.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "core/error.h"
#include "core/log.h"

namespace zaya::bench {

const char* const kMemCsvHeader = "kernel,threads,array_bytes,best_MBps,avg_MBps,min_MBps";

int stream_bytes_per_element(const std::string& k) {
  if (k == "copy" || k == "scale") return 2 * int(sizeof(double));
  if (k == "add" || k == "triad") return 3 * int(sizeof(double));
  fail("unknown STREAM kernel '", k, "'");
}

namespace {

struct Arrays {
  std::unique_ptr<double, void (*)(void*)> a{nullptr, std::free}, b{nullptr, std::free}, c{nullptr, std::free};
  explicit Arrays(int64_t n) {
    size_t bytes = (size_t(n) * sizeof(double) + 4095) / 4096 * 4096;
    a.reset(static_cast<double*>(std::aligned_alloc(4096, bytes)));
    b.reset(static_cast<double*>(std::aligned_alloc(4096, bytes)));
    c.reset(static_cast<double*>(std::aligned_alloc(4096, bytes)));
    if (!a || !b || !c) fail("cannot allocate 3 arrays of ", human_bytes(double(bytes)), " for STREAM");
  }
};

}  // namespace

bool stream_validate(const double* a, const double* b, const double* c, int64_t n, int ntimes, std::string& msg) {
  double aj = 1.0, bj = 2.0, cj = 0.0;
  aj = 2.0E0 * aj;
  const double scalar = 3.0;
  for (int k = 0; k < ntimes; ++k) {
    cj = aj;
    bj = scalar * cj;
    cj = aj + bj;
    aj = bj + scalar * cj;
  }
  double aSum = 0, bSum = 0, cSum = 0;
#pragma omp parallel for reduction(+ : aSum, bSum, cSum) schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    aSum += std::fabs(a[j] - aj);
    bSum += std::fabs(b[j] - bj);
    cSum += std::fabs(c[j] - cj);
  }
  const double eps = 1.e-13;
  double err[3] = {aSum / double(n) / std::fabs(aj), bSum / double(n) / std::fabs(bj), cSum / double(n) / std::fabs(cj)};
  const char* names = "abc";
  const double* arr[3] = {a, b, c};
  const double want[3] = {aj, bj, cj};
  msg.clear();
  for (int i = 0; i < 3; ++i) {
    if (!(err[i] <= eps)) {
      int64_t bad = 0;
      for (int64_t j = 0; j < n; ++j)
        if (!(std::fabs(arr[i][j] / want[i] - 1.0) <= eps)) ++bad;
      msg += cat("Failed Validation on array ", names[i], "[], AvgRelAbsErr > epsilon (", eps, "): expected ", want[i],
                 ", AvgRelAbsErr ", err[i], ", ", bad, " of ", n, " elements wrong. ");
    }
  }
  if (!msg.empty()) return false;
  msg = cat("Solution Validates: avg error less than ", eps, " on all three arrays");
  return true;
}

StreamRun run_stream(int64_t n, int ntimes, int threads, bool corrupt) {
  if (n < 1) fail("STREAM: array of ", n, " elements");
  if (ntimes < 2) fail("--ntimes must be >= 2 (the first pass is not timed)");
  if (threads > 0) omp_set_num_threads(threads);
  int nt = threads > 0 ? threads : omp_get_max_threads();
  Arrays arr(n);
  double *a = arr.a.get(), *b = arr.b.get(), *c = arr.c.get();
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {  // first touch by the threads that stream the data
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) a[j] = 2.0E0 * a[j];
  const double scalar = 3.0;
  std::vector<std::vector<double>> times(4, std::vector<double>(size_t(ntimes)));
  for (int k = 0; k < ntimes; ++k) {
    double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) c[j] = a[j];
    times[0][size_t(k)] = omp_get_wtime() - t;
    t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) b[j] = scalar * c[j];
    times[1][size_t(k)] = omp_get_wtime() - t;
    t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) c[j] = a[j] + b[j];
    times[2][size_t(k)] = omp_get_wtime() - t;
    t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; ++j) a[j] = b[j] + scalar * c[j];
    times[3][size_t(k)] = omp_get_wtime() - t;
  }
  StreamRun run;
  const char* names[4] = {"copy", "scale", "add", "triad"};
  for (int i = 0; i < 4; ++i) {
    StreamKernel kr;
    kr.name = names[i];
    kr.threads = nt;
    kr.array_bytes = n * int64_t(sizeof(double));
    double sum = 0, mn = std::numeric_limits<double>::max(), mx = 0;
    for (int k = 1; k < ntimes; ++k) {  // STREAM skips the first pass
      double t = times[size_t(i)][size_t(k)];
      sum += t;
      mn = std::min(mn, t);
      mx = std::max(mx, t);
    }
    kr.avg_time = sum / (ntimes - 1);
    kr.min_time = mn;
    kr.max_time = mx;
    double bytes = double(stream_bytes_per_element(kr.name)) * double(n);
    kr.best_MBps = 1.0e-6 * bytes / mn;
    kr.avg_MBps = 1.0e-6 * bytes / kr.avg_time;
    kr.min_MBps = 1.0e-6 * bytes / mx;
    run.kernels.push_back(kr);
  }
  if (corrupt) a[n / 2] += 1.0;
  run.valid = stream_validate(a, b, c, n, ntimes, run.validation);
  return run;
}

double read_bandwidth_gbs(const std::vector<std::pair<const void*, size_t>>& ranges, int threads, int passes) {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  double best = 0, bytes = 0;
  // Whole aligned 8-byte words of each range (mapped tensors are only 2-byte aligned).
  std::vector<std::pair<const uint64_t*, int64_t>> words;
  for (auto& [ptr, n] : ranges) {
    const uintptr_t a = (uintptr_t(ptr) + 7) & ~uintptr_t(7), skip = a - uintptr_t(ptr);
    if (n <= skip) continue;
    words.emplace_back(reinterpret_cast<const uint64_t*>(a), int64_t((n - skip) / 8));
    bytes += double(words.back().second) * 8;
  }
  uint64_t sink = 0;
  for (int pass = 0; pass <= passes; ++pass) {
    const double t0 = omp_get_wtime();
    for (auto& [w, count] : words) {
      uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum) num_threads(nt)
      for (int64_t i = 0; i < count; ++i) sum += w[i];
      sink += sum;
    }
    const double dt = omp_get_wtime() - t0;
    if (pass > 0) best = std::max(best, bytes / dt / 1e9);
  }
  volatile uint64_t keep = sink;  // the sums must not be optimised away
  (void)keep;
  return best;
}

std::vector<SweepPoint> stream_sweep(int64_t min_ws, int64_t max_ws, int threads, double min_time) {
  if (min_ws < 3 * 64 || max_ws < min_ws) fail("mem sweep: need 192 <= min working set <= max working set");
  if (threads > 0) omp_set_num_threads(threads);
  const int64_t nmax = max_ws / 24;
  Arrays arr(nmax);
  double *a = arr.a.get(), *b = arr.b.get(), *c = arr.c.get();
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < nmax; ++j) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.5;
  }
  const double scalar = 3.0;
  std::vector<SweepPoint> pts;
  for (int64_t ws = min_ws; ws <= max_ws; ws *= 2) {
    const int64_t n = ws / 24;
    auto pass = [&](int64_t reps) {  // each thread streams its static chunk reps times, no barriers
      double t = omp_get_wtime();
#pragma omp parallel
      for (int64_t r = 0; r < reps; ++r) {
#pragma omp for schedule(static) nowait
        for (int64_t j = 0; j < n; ++j) a[j] = b[j] + scalar * c[j];
      }
      return omp_get_wtime() - t;
    };
    pass(1);
    double t1 = std::max(pass(1), 1e-7);
    int64_t reps = std::max<int64_t>(1, int64_t(std::ceil(min_time / t1)));
    double best = 1e300, worst = 0, sum = 0;
    for (int m = 0; m < 5; ++m) {
      double t = pass(reps);
      best = std::min(best, t);
      worst = std::max(worst, t);
      sum += t;
    }
    double bytes = 24.0 * double(n) * double(reps);
    pts.push_back({n * 8, n * 24, 1e-6 * bytes / best, 1e-6 * bytes / (sum / 5), 1e-6 * bytes / worst});
  }
  return pts;
}

void MemOptions::validate() const {
  if (threads < 0) fail("--threads must be >= 0 (got ", threads, ")");
  if (array_bytes < 0) fail("--array-bytes must be >= 0");
  if (array_bytes > 0 && array_bytes < 1024) fail("--array-bytes ", array_bytes, " is too small (>= 1K)");
  if (llc_bytes < 0) fail("--llc-bytes must be >= 0");
  if (ntimes < 2) fail("--ntimes must be >= 2 (got ", ntimes, ")");
  if (sweep_time <= 0) fail("--sweep-time must be > 0");
  if (sweep_min < 0 || sweep_max < 0 || (sweep_min && sweep_max && sweep_max < sweep_min))
    fail("--sweep-min/--sweep-max: need 0 < min <= max");
}

StreamRun run_mem(const MemOptions& o, std::FILE* out) {
  o.validate();
  CacheSizes cs = detect_caches();
  int64_t llc = o.llc_bytes > 0 ? o.llc_bytes : cs.last_level();
  if (llc <= 0) {
    llc = 32 << 20;
    log_warn("last-level cache size unknown: assuming 32 MiB (set --llc-bytes)");
  }
  int64_t array_bytes = o.array_bytes > 0 ? o.array_bytes : 4 * llc;
  int64_t n = array_bytes / int64_t(sizeof(double));
  int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  std::fprintf(out, "-------------------------------------------------------------\n");
  std::fprintf(out, "STREAM (zaya bench mem), double precision, %d thread%s\n", threads, threads == 1 ? "" : "s");
  std::fprintf(out, "Caches: L1d %s, L2 %s, L3 %s; last-level cache used: %s%s\n", human_bytes(double(cs.l1d)).c_str(),
               human_bytes(double(cs.l2)).c_str(), human_bytes(double(cs.l3)).c_str(), human_bytes(double(llc)).c_str(),
               o.llc_bytes > 0 ? " (--llc-bytes)" : "");
  std::fprintf(out, "Array size = %lld (elements), %s per array, %s total%s\n", (long long)n,
               human_bytes(double(n) * 8).c_str(), human_bytes(3.0 * double(n) * 8).c_str(),
               double(n) * 8 < 4.0 * double(llc) ? "  WARNING: below 4 x last-level cache" : "");
  std::fprintf(out, "Each kernel will be executed %d times; the first pass is not counted.\n", o.ntimes);
  std::fflush(out);
  StreamRun run = run_stream(n, o.ntimes, threads, o.debug_corrupt);
  std::fprintf(out, "-------------------------------------------------------------\n");
  std::fprintf(out, "Function    Best Rate MB/s  Avg time     Min time     Max time   Avg Rate MB/s  Min Rate MB/s\n");
  for (const auto& k : run.kernels) {
    std::string nm = k.name;
    nm[0] = char(std::toupper(nm[0]));
    std::fprintf(out, "%-12s%11.1f  %11.6f  %11.6f  %11.6f  %13.1f  %13.1f\n", (nm + ":").c_str(), k.best_MBps,
                 k.avg_time, k.min_time, k.max_time, k.avg_MBps, k.min_MBps);
  }
  std::fprintf(out, "-------------------------------------------------------------\n%s\n", run.validation.c_str());
  std::fprintf(out, "-------------------------------------------------------------\n");
  CsvWriter csv(o.csv, kMemCsvHeader);
  for (const auto& k : run.kernels)
    csv.row({k.name, std::to_string(k.threads), std::to_string(k.array_bytes), fmt(k.best_MBps, 1), fmt(k.avg_MBps, 1),
             fmt(k.min_MBps, 1)});
  std::vector<SweepPoint> pts;
  if (o.sweep) {
    int64_t lo = o.sweep_min > 0 ? o.sweep_min : std::max<int64_t>(cs.l1d > 0 ? cs.l1d / 2 : 16 << 10, 3 * 64 * threads);
    int64_t hi = o.sweep_max > 0 ? o.sweep_max : 4 * llc;
    std::fprintf(out, "Triad bandwidth vs working set (3 arrays), %d threads, best of 5:\n%16s %16s %14s\n", threads,
                 "working set (B)", "array (B)", "best MB/s");
    pts = stream_sweep(lo, hi, threads, o.sweep_time);
    CsvWriter sc(o.sweep_csv, kMemCsvHeader);
    for (const auto& p : pts) {
      std::fprintf(out, "%16lld %16lld %14.1f\n", (long long)p.working_set, (long long)p.array_bytes, p.best_MBps);
      sc.row({"triad", std::to_string(threads), std::to_string(p.array_bytes), fmt(p.best_MBps, 1), fmt(p.avg_MBps, 1),
              fmt(p.min_MBps, 1)});
    }
    if (!o.sweep_plot.empty() && !o.sweep_csv.empty())
      run_plot("mem-sweep", {o.sweep_csv, o.sweep_plot, std::to_string(cs.l1d), std::to_string(cs.l2),
                             std::to_string(cs.l3)});
  }
  const StreamKernel& triad = run.kernels[3];
  if (!o.json.empty()) {
    nlohmann::json j;
    j["threads"] = threads;
    j["array_bytes"] = n * 8;
    j["llc_bytes"] = llc;
    j["caches"] = {{"l1d", cs.l1d}, {"l2", cs.l2}, {"l3", cs.l3}};
    j["valid"] = run.valid;
    j["validation"] = run.validation;
    for (const auto& k : run.kernels)
      j["kernels"][k.name] = {{"best_MBps", k.best_MBps}, {"avg_MBps", k.avg_MBps}, {"min_MBps", k.min_MBps},
                              {"avg_time", k.avg_time}, {"min_time", k.min_time}, {"max_time", k.max_time}};
    for (const auto& p : pts)
      j["sweep"].push_back({{"working_set", p.working_set}, {"array_bytes", p.array_bytes}, {"best_MBps", p.best_MBps}});
    write_json_file(o.json, j);
  }
  if (!run.valid) fail("STREAM validation failed: ", run.validation);
  if (!o.peak_json.empty()) merge_json_file(o.peak_json, {{"triad_MBps", triad.best_MBps}});
  return run;
}

}  // namespace zaya::bench
