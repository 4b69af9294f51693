// What the supervisor concludes from the ranks' heartbeats and their processes: which ranks
// straggle (judged on the rolling compute-time windows the heartbeats carry, never on what
// one poll happened to see) and which rank a hang is to be blamed on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ft/heartbeat.h"

namespace zaya::ft {

struct StragglerFinding {
  int rank = 0;
  double window_s = 0;    // the rank's median compute time over its window
  double baseline_s = 0;  // the lower median of all ranks' window medians
  int64_t step = 0;       // the step the rank's window ends at
};

// Once every rank reports a full window: the ranks whose median exceeds factor x the lower
// median of the medians (with two ranks, the faster one). Empty until then.
std::vector<StragglerFinding> find_stragglers(const std::vector<Heartbeat>& hbs, double factor);

// A process's main thread as /proc shows it (the thread that trains and waits on peers).
struct ProcSample {
  bool ok = false;
  char state = 0;       // R, S, D, T (stopped), t, Z; 0 when gone
  int64_t cpu_ns = -1;  // time on a CPU (-1: not available)
  int64_t vcsw = -1;    // voluntary context switches (-1: not available)
};
ProcSample sample_process(int pid);

// Seconds the calling thread has spent runnable but not running (waiting for a CPU) since
// it started, from /proc/thread-self/schedstat; -1 where the kernel does not report it. A
// rank's compute time less this is what the scheduler cannot sway.
double thread_runqueue_wait_s();

// Between two samples: 1 when the thread ran or woke (a rank waiting on a peer polls and
// sleeps in a loop), 0 when it did neither (stopped, or blocked outside any collective),
// -1 when the samples do not tell.
int activity_between(const ProcSample& a, const ProcSample& b);

struct RankState {
  bool have = false;   // a heartbeat was read
  std::string stage;   // its last stage
  int64_t step = 0;    // steps completed, as that heartbeat says
  double hb_time = 0;  // unix seconds of the heartbeat's write
  char state = 0;      // process state at the verdict (0: unknown or gone)
  int activity = -1;   // since the heartbeat went quiet (activity_between)
};

struct HangVerdict {
  int rank = -1;
  std::string cause;
};

// The rank a hang is attributed to, in this order: a stopped process; a rank that never
// wrote a heartbeat; a rank idle while others poll (they wait in a collective, it does not);
// a rank whose step is behind the others'; then the heartbeat that went stale first. No rank
// (-1) when none wrote a heartbeat.
HangVerdict attribute_hang(const std::vector<RankState>& ranks);

}  // namespace zaya::ft
