// Where a step goes: named zones nested into a tree ("forward/cca/attention"), timed on the
// thread that runs the step (the zones sit between parallel regions, never inside one).
// GEMM time is charged to the innermost open zone, so each row splits into GEMM and the
// rest (elementwise work, routing, copies). Off by default: a closed zone then costs one
// branch. `zaya train-bench --profile` turns it on and prints the tree.
#pragma once
#include <string>
#include <vector>

namespace zaya::prof {

void enable(bool on);
bool enabled();
void reset();

// The zones' clock: wall time (default), or the calling thread's CPU time, which leaves out
// the time the thread waited for a core: with one thread (OMP_NUM_THREADS=1) it measures the
// work even on a shared, loaded machine.
enum class Clock { Wall, ThreadCpu };
void set_clock(Clock c);
double now();

// Charges a GEMM of `seconds` and `flops` to the innermost open zone (main thread only).
void add_gemm(double seconds, double flops);

struct Row {
  std::string path;   // "forward/cca/attention"
  int depth = 0;      // number of '/' in path
  long calls = 0;
  double seconds = 0;       // inclusive wall time
  double gemm_seconds = 0;  // GEMM time inside (inclusive)
  double gemm_flops = 0;
};
// Rows in tree order (a parent before its children, children in first-seen order).
std::vector<Row> report();

class Zone {
 public:
  explicit Zone(const char* name);
  ~Zone();
  Zone(const Zone&) = delete;
  Zone& operator=(const Zone&) = delete;

 private:
  int id_ = -1;
  double t0_ = 0;
};

// Prints the tree as a table: inclusive ms per step, share of the step, GEMM ms and GFLOP/s,
// other ms. `steps` divides the totals (the profile usually spans several steps).
std::string format_table(const std::vector<Row>& rows, int steps);

}  // namespace zaya::prof

#define ZAYA_PROF_CAT2(a, b) a##b
#define ZAYA_PROF_CAT(a, b) ZAYA_PROF_CAT2(a, b)
#define ZAYA_PROFILE(name) ::zaya::prof::Zone ZAYA_PROF_CAT(zaya_prof_zone_, __LINE__)(name)
