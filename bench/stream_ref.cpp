// Reference STREAM: the classic McCalpin kernels and timing (stream.c, version 5.10 style:
// gettimeofday timer, NTIMES = 10, first pass skipped, best rate = bytes / min time), with
// the array size taken from the command line instead of a compile-time constant. Independent
// of src/bench, used to cross-check `zaya bench mem`.
//   OMP_NUM_THREADS=T bench_stream_ref ELEMENTS_PER_ARRAY
#include <omp.h>
#include <sys/time.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#define NTIMES 10

static double mysecond() {
  struct timeval tp;
  gettimeofday(&tp, nullptr);
  return double(tp.tv_sec) + double(tp.tv_usec) * 1.e-6;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_stream_ref ELEMENTS_PER_ARRAY\n");
    return 2;
  }
  const long N = std::atol(argv[1]);
  if (N < 1000) {
    std::fprintf(stderr, "bench_stream_ref: array too small\n");
    return 2;
  }
  double* a = static_cast<double*>(std::aligned_alloc(4096, (size_t(N) * 8 + 4095) / 4096 * 4096));
  double* b = static_cast<double*>(std::aligned_alloc(4096, (size_t(N) * 8 + 4095) / 4096 * 4096));
  double* c = static_cast<double*>(std::aligned_alloc(4096, (size_t(N) * 8 + 4095) / 4096 * 4096));
  if (!a || !b || !c) return 1;
  const char* label[4] = {"Copy:      ", "Scale:     ", "Add:       ", "Triad:     "};
  double bytes[4] = {2.0 * 8 * N, 2.0 * 8 * N, 3.0 * 8 * N, 3.0 * 8 * N};
  double avgtime[4] = {0, 0, 0, 0}, maxtime[4] = {0, 0, 0, 0}, mintime[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX};
  double times[4][NTIMES];
  std::printf("STREAM reference: Array size = %ld, %d threads\n", N, omp_get_max_threads());
#pragma omp parallel for
  for (long j = 0; j < N; j++) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
#pragma omp parallel for
  for (long j = 0; j < N; j++) a[j] = 2.0E0 * a[j];
  double scalar = 3.0;
  for (int k = 0; k < NTIMES; k++) {
    times[0][k] = mysecond();
#pragma omp parallel for
    for (long j = 0; j < N; j++) c[j] = a[j];
    times[0][k] = mysecond() - times[0][k];
    times[1][k] = mysecond();
#pragma omp parallel for
    for (long j = 0; j < N; j++) b[j] = scalar * c[j];
    times[1][k] = mysecond() - times[1][k];
    times[2][k] = mysecond();
#pragma omp parallel for
    for (long j = 0; j < N; j++) c[j] = a[j] + b[j];
    times[2][k] = mysecond() - times[2][k];
    times[3][k] = mysecond();
#pragma omp parallel for
    for (long j = 0; j < N; j++) a[j] = b[j] + scalar * c[j];
    times[3][k] = mysecond() - times[3][k];
  }
  for (int k = 1; k < NTIMES; k++)
    for (int j = 0; j < 4; j++) {
      avgtime[j] += times[j][k];
      mintime[j] = mintime[j] < times[j][k] ? mintime[j] : times[j][k];
      maxtime[j] = maxtime[j] > times[j][k] ? maxtime[j] : times[j][k];
    }
  std::printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
  for (int j = 0; j < 4; j++) {
    avgtime[j] /= double(NTIMES - 1);
    std::printf("%s%12.1f  %11.6f  %11.6f  %11.6f\n", label[j], 1.0E-06 * bytes[j] / mintime[j], avgtime[j], mintime[j],
                maxtime[j]);
  }
  // STREAM's validation, abbreviated: every element against the replayed scalars.
  double aj = 2.0, bj = 2.0, cj = 0.0;
  for (int k = 0; k < NTIMES; k++) {
    cj = aj;
    bj = scalar * cj;
    cj = aj + bj;
    aj = bj + scalar * cj;
  }
  double ea = 0, eb = 0, ec = 0;
  for (long j = 0; j < N; j++) {
    ea += std::fabs(a[j] - aj);
    eb += std::fabs(b[j] - bj);
    ec += std::fabs(c[j] - cj);
  }
  bool ok = ea / N / aj <= 1e-13 && eb / N / bj <= 1e-13 && ec / N / cj <= 1e-13;
  std::printf("%s\n", ok ? "Solution Validates" : "Failed Validation");
  std::free(a);
  std::free(b);
  std::free(c);
  return ok ? 0 : 1;
}
