#include "ft/diagnose.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace zaya::ft {

std::vector<StragglerFinding> find_stragglers(const std::vector<Heartbeat>& hbs, double factor) {
  std::vector<StragglerFinding> out;
  if (hbs.size() < 2) return out;
  std::vector<double> med;
  for (const Heartbeat& h : hbs) {
    if (!h.window_full() || !(h.window_s > 0)) return out;
    med.push_back(h.window_s);
  }
  std::vector<double> sorted = med;
  std::sort(sorted.begin(), sorted.end());
  const double base = sorted[(sorted.size() - 1) / 2];
  for (size_t r = 0; r < hbs.size(); ++r)
    if (med[r] > factor * base) out.push_back({int(r), med[r], base, hbs[r].window_step});
  return out;
}

double thread_runqueue_wait_s() {
  std::ifstream f("/proc/thread-self/schedstat");
  long long run_ns = -1, wait_ns = -1;
  if (!(f >> run_ns >> wait_ns) || wait_ns < 0) return -1;
  return double(wait_ns) * 1e-9;
}

ProcSample sample_process(int pid) {
  ProcSample s;
  if (pid <= 0) return s;
  const std::string dir = "/proc/" + std::to_string(pid);
  std::string stat;
  std::getline(std::ifstream(dir + "/stat"), stat);
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return s;
  s.ok = true;
  s.state = stat[paren + 2];
  std::ifstream sched(dir + "/schedstat");
  long long ns = -1;
  if (sched >> ns) s.cpu_ns = ns;
  std::ifstream status(dir + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) s.vcsw = std::stoll(line.substr(24));
  return s;
}

int activity_between(const ProcSample& a, const ProcSample& b) {
  if (!a.ok || !b.ok) return -1;
  const bool cpu = a.cpu_ns >= 0 && b.cpu_ns >= 0, sw = a.vcsw >= 0 && b.vcsw >= 0;
  if (!cpu && !sw) return -1;
  const int64_t dcpu = cpu ? b.cpu_ns - a.cpu_ns : 0, dsw = sw ? b.vcsw - a.vcsw : 0;
  // A poll loop wakes thousands of times a second; a stray wake-up is not one.
  if (dsw >= 5 || dcpu >= 1000000) return 1;
  if (dsw == 0 && dcpu < 100000) return 0;
  return -1;
}

namespace {

std::string rank_list(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += cat(s.empty() ? "" : ", ", x);
  return s;
}

}  // namespace

HangVerdict attribute_hang(const std::vector<RankState>& ranks) {
  HangVerdict v;
  if (std::none_of(ranks.begin(), ranks.end(), [](const RankState& s) { return s.have; })) {
    v.cause = "no rank wrote a heartbeat";
    return v;
  }
  std::vector<int> cand;
  auto pick = [&](auto pred) {
    std::vector<int> c;
    for (int r : cand)
      if (pred(ranks[size_t(r)])) c.push_back(r);
    return c;
  };
  for (size_t r = 0; r < ranks.size(); ++r) cand.push_back(int(r));
  std::string cause;
  std::vector<int> c = pick([](const RankState& s) { return s.state == 'T' || s.state == 't'; });
  if (!c.empty()) {
    cand = c;
    cause = "its process is stopped (SIGSTOP)";
  } else if (c = pick([](const RankState& s) { return !s.have; }); !c.empty() && c.size() < cand.size()) {
    cand = c;
    cause = "it never wrote a heartbeat";
  } else {
    std::vector<int> active = pick([](const RankState& s) { return s.activity == 1; });
    c = pick([](const RankState& s) { return s.activity == 0; });
    if (!c.empty() && !active.empty()) {
      cand = c;
      cause = cat("it is idle while rank(s) ", rank_list(active), " poll, waiting in a collective");
    } else {
      // checkpoint_done names the checkpoint's step, which a background save reports late.
      const bool comparable = std::none_of(ranks.begin(), ranks.end(),
                                           [](const RankState& s) { return s.stage == "checkpoint_done"; });
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (const RankState& s : ranks) lo = std::min(lo, s.step), hi = std::max(hi, s.step);
      if (comparable && lo < hi) {
        cand = pick([&](const RankState& s) { return s.step == lo; });
        cause = cat("it is behind: step ", lo, " while others reached ", hi);
      }
    }
  }
  // Among what is left: the heartbeat that went stale first (none at all counts as first).
  v.rank = cand[0];
  for (int r : cand) {
    const RankState &s = ranks[size_t(r)], &b = ranks[size_t(v.rank)];
    if ((!s.have && b.have) || (s.have == b.have && s.hb_time < b.hb_time)) v.rank = r;
  }
  if (cause.empty()) cause = ranks.size() == 1 ? "its heartbeat went stale" : "its heartbeat went stale first";
  else if (cand.size() > 1) cause += "; its heartbeat went stale first";
  v.cause = cause;
  return v;
}

}  // namespace zaya::ft
