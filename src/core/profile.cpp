#include "core/profile.h"

#include <omp.h>

#include <time.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "core/timer.h"

namespace zaya::prof {

namespace {

struct Node {
  Row row;
  int parent = -1;
  std::vector<int> children;
};

struct State {
  bool on = false;
  Clock clock = Clock::Wall;
  std::vector<Node> nodes;
  std::map<std::pair<int, std::string>, int> index;  // (parent, name) -> node
  std::vector<int> stack;
};

State& st() {
  static State s;
  return s;
}

int node_for(int parent, const char* name) {
  State& s = st();
  auto key = std::make_pair(parent, std::string(name));
  auto it = s.index.find(key);
  if (it != s.index.end()) return it->second;
  Node n;
  n.parent = parent;
  n.row.path = parent < 0 ? std::string(name) : s.nodes[size_t(parent)].row.path + "/" + name;
  n.row.depth = parent < 0 ? 0 : s.nodes[size_t(parent)].row.depth + 1;
  s.nodes.push_back(std::move(n));
  const int id = int(s.nodes.size()) - 1;
  if (parent >= 0) s.nodes[size_t(parent)].children.push_back(id);
  s.index.emplace(std::move(key), id);
  return id;
}

void walk(const std::vector<Node>& nodes, int id, std::vector<Row>& out) {
  out.push_back(nodes[size_t(id)].row);
  for (int c : nodes[size_t(id)].children) walk(nodes, c, out);
}

}  // namespace

void enable(bool on) { st().on = on; }
void set_clock(Clock c) { st().clock = c; }

double now() {
  if (st().clock == Clock::Wall) return now_seconds();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
bool enabled() { return st().on; }

void reset() {
  State& s = st();
  s.nodes.clear();
  s.index.clear();
  s.stack.clear();
}

void add_gemm(double seconds, double flops) {
  State& s = st();
  if (!s.on || omp_in_parallel()) return;
  for (int id : s.stack) {  // inclusive: every open zone holds this GEMM
    s.nodes[size_t(id)].row.gemm_seconds += seconds;
    s.nodes[size_t(id)].row.gemm_flops += flops;
  }
}

Zone::Zone(const char* name) {
  State& s = st();
  if (!s.on || omp_in_parallel()) return;
  id_ = node_for(s.stack.empty() ? -1 : s.stack.back(), name);
  s.stack.push_back(id_);
  t0_ = now();
}

Zone::~Zone() {
  if (id_ < 0) return;
  State& s = st();
  Row& r = s.nodes[size_t(id_)].row;
  r.seconds += now() - t0_;
  r.calls++;
  if (!s.stack.empty() && s.stack.back() == id_) s.stack.pop_back();
}

std::vector<Row> report() {
  const State& s = st();
  std::vector<Row> out;
  for (size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].parent < 0) walk(s.nodes, int(i), out);
  return out;
}

std::string format_table(const std::vector<Row>& rows, int steps) {
  double total = 0;
  for (const Row& r : rows)
    if (r.depth == 0) total += r.seconds;
  const double per = steps > 0 ? 1.0 / steps : 1.0;
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-34s %9s %6s %9s %8s %9s %7s\n", "zone (per step)", "ms", "share", "GEMM ms",
                "GFLOP/s", "other ms", "calls");
  out += buf;
  for (const Row& r : rows) {
    std::string name(size_t(2 * r.depth), ' ');
    const size_t slash = r.path.rfind('/');
    name += slash == std::string::npos ? r.path : r.path.substr(slash + 1);
    const double gf = r.gemm_seconds > 0 ? r.gemm_flops / r.gemm_seconds * 1e-9 : 0;
    std::snprintf(buf, sizeof buf, "%-34s %9.2f %5.1f%% %9.2f %8.0f %9.2f %7.0f\n", name.c_str(), r.seconds * per * 1e3,
                  total > 0 ? 100 * r.seconds / total : 0.0, r.gemm_seconds * per * 1e3, gf,
                  (r.seconds - r.gemm_seconds) * per * 1e3, double(r.calls) * per);
    out += buf;
  }
  return out;
}

}  // namespace zaya::prof
