#include "comm/comm.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace zaya::comm {
namespace {

bool g_inited = false, g_owned = false, g_mpi = false;
double g_timeout = 300.0;

int to_int(size_t n, const char* what) {
  ZAYA_CHECK(n <= size_t(INT_MAX), "comm: ", what, ": count ", n, " exceeds MPI's int limit");
  return int(n);
}

std::shared_ptr<std::vector<int>> ints(const std::vector<size_t>& v, const char* what) {
  auto p = std::make_shared<std::vector<int>>(v.size());
  for (size_t i = 0; i < v.size(); ++i) (*p)[i] = to_int(v[i], what);
  return p;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, size_t(len));
}

}  // namespace

bool launched_by_mpirun() {
  const char* s = std::getenv("OMPI_COMM_WORLD_SIZE");
  return s && *s;
}

double timeout() { return g_timeout; }
void set_timeout(double seconds) {
  ZAYA_CHECK(seconds > 0, "comm: timeout must be > 0 seconds, got ", seconds);
  g_timeout = seconds;
}

void init_world(bool force_mpi) {
  if (g_inited) return;
  g_inited = true;
  if (const char* t = std::getenv("ZAYA_COMM_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    ZAYA_CHECK(end && *end == 0 && v > 0, "ZAYA_COMM_TIMEOUT: '", t, "' is not a positive number of seconds");
    g_timeout = v;
  }
  if (!force_mpi && !launched_by_mpirun()) return;  // world of one: no MPI calls at all
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    g_owned = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_mpi = true;
}

void finalize_world() {
  if (!g_owned) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
  g_owned = false;
}

void abort_world(int code) {
  int fin = 0;
  if (g_mpi) MPI_Finalized(&fin);
  if (g_mpi && !fin) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

Communicator& Communicator::world() {
  static Communicator w = [] {
    init_world(false);
    Communicator c;
    if (g_mpi) {
      c.comm_ = MPI_COMM_WORLD;
      MPI_Comm_rank(MPI_COMM_WORLD, &c.rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &c.size_);
      c.name_ = "world";
    } else {
      c.name_ = "world(1)";
    }
    return c;
  }();
  return w;
}

Communicator Communicator::split(int color, int key, const std::string& name) const {
  Communicator c;
  c.name_ = name;
  if (!uses_mpi()) return c;
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &out), "comm split");
  c.comm_ = out;
  MPI_Comm_rank(out, &c.rank_);
  MPI_Comm_size(out, &c.size_);
  return c;
}

void Communicator::check(int rc, const char* what) const {
  if (rc != MPI_SUCCESS)
    fail("comm: ", what, " on group ", name_, " (rank ", rank_, " of ", size_, ") failed: ", mpi_error_string(rc));
}

Request Communicator::make(const char* what) const {
  Request r;
  r.what_ = std::string(what) + " on group " + name_ + " (rank " + std::to_string(rank_) + " of " +
            std::to_string(size_) + ")";
  r.timeout_ = g_timeout;
  return r;
}

bool Request::test() {
  if (req_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  const int rc = MPI_Test(&req_, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) fail("comm: ", what_, " failed: ", mpi_error_string(rc));
  if (done) {
    req_ = MPI_REQUEST_NULL;
    keep_.reset();
  }
  return done != 0;
}

void Request::wait() {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_);
  int spins = 0;
  while (!test()) {
    if (clock::now() > deadline)
      fail("comm: ", what_, " timed out after ", timeout_, " s: a peer rank died or hung");
    // Spin briefly, then back off: with oversubscribed cores a busy poll starves the peer.
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 1000 ? 500 : 20));
  }
}

void wait_all(std::vector<Request>& reqs) {
  for (auto& r : reqs) r.wait();
}

Request Communicator::iall_reduce_raw(void* buf, size_t n, MPI_Datatype t, ReduceOp op, size_t) const {
  Request r = make("all-reduce");
  if (!uses_mpi() || n == 0) return r;
  check(MPI_Iallreduce(MPI_IN_PLACE, buf, to_int(n, "all-reduce"), t, mpi_op(op), comm_, &r.req_), "all-reduce");
  return r;
}

Request Communicator::ireduce_scatterv_raw(const void* s, void* rv, const std::vector<size_t>& c, MPI_Datatype t,
                                           size_t esize) const {
  ZAYA_CHECK(c.size() == size_t(size_), "comm: reduce-scatter-v needs ", size_, " counts, got ", c.size());
  Request r = make("reduce-scatter-v");
  if (!uses_mpi()) {
    if (c[0] && s != rv) std::memmove(rv, s, c[0] * esize);
    return r;
  }
  auto k = ints(c, "reduce-scatter-v");
  check(MPI_Ireduce_scatter(s, rv, k->data(), t, MPI_SUM, comm_, &r.req_), "reduce-scatter-v");
  r.keep_ = k;
  return r;
}

Request Communicator::iall_gatherv_raw(void* b, const std::vector<size_t>& c, const std::vector<size_t>& d,
                                       MPI_Datatype t, size_t) const {
  ZAYA_CHECK(c.size() == size_t(size_) && d.size() == size_t(size_), "comm: all-gather-v needs ", size_,
             " counts and displacements");
  Request r = make("all-gather-v");
  if (!uses_mpi()) return r;
  auto k = std::make_shared<std::vector<int>>(*ints(c, "all-gather-v"));
  auto dd = ints(d, "all-gather-v displacement");
  k->insert(k->end(), dd->begin(), dd->end());
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, t, b, k->data(), k->data() + size_, t, comm_, &r.req_), "all-gather-v");
  r.keep_ = k;
  return r;
}

Request Communicator::ibroadcast_raw(void* b, size_t n, MPI_Datatype t, int root, size_t) const {
  ZAYA_CHECK(root >= 0 && root < size_, "comm: broadcast root ", root, " outside group of ", size_);
  Request r = make("broadcast");
  if (!uses_mpi() || n == 0) return r;
  check(MPI_Ibcast(b, to_int(n, "broadcast"), t, root, comm_, &r.req_), "broadcast");
  return r;
}

Request Communicator::ialltoallv_raw(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                                     void* rv, const std::vector<size_t>& rc, const std::vector<size_t>& rd,
                                     MPI_Datatype t, size_t esize) const {
  const size_t P = size_t(size_);
  ZAYA_CHECK(sc.size() == P && sd.size() == P && rc.size() == P && rd.size() == P, "comm: all-to-all-v needs ", P,
             " counts and displacements per side");
  Request r = make("all-to-all-v");
  if (!uses_mpi()) {
    ZAYA_CHECK(sc[0] == rc[0], "comm: all-to-all-v to self sends ", sc[0], " but receives ", rc[0]);
    if (sc[0]) std::memmove(static_cast<char*>(rv) + rd[0] * esize, static_cast<const char*>(s) + sd[0] * esize, sc[0] * esize);
    return r;
  }
  auto k = std::make_shared<std::vector<int>>();
  for (const auto* v : {&sc, &sd, &rc, &rd}) {
    auto x = ints(*v, "all-to-all-v");
    k->insert(k->end(), x->begin(), x->end());
  }
  const int* p = k->data();
  check(MPI_Ialltoallv(s, p, p + P, t, rv, p + 2 * P, p + 3 * P, t, comm_, &r.req_), "all-to-all-v");
  r.keep_ = k;
  return r;
}

Request Communicator::isend_raw(const void* b, size_t n, MPI_Datatype t, int dst, int tag) const {
  ZAYA_CHECK(uses_mpi(), "comm: send on a world of one (no peer)");
  ZAYA_CHECK(dst >= 0 && dst < size_, "comm: send to rank ", dst, " outside group of ", size_);
  Request r = make("send");
  check(MPI_Isend(b, to_int(n, "send"), t, dst, tag, comm_, &r.req_), "send");
  return r;
}

Request Communicator::irecv_raw(void* b, size_t n, MPI_Datatype t, int src, int tag) const {
  ZAYA_CHECK(uses_mpi(), "comm: recv on a world of one (no peer)");
  ZAYA_CHECK(src >= 0 && src < size_, "comm: recv from rank ", src, " outside group of ", size_);
  Request r = make("recv");
  check(MPI_Irecv(b, to_int(n, "recv"), t, src, tag, comm_, &r.req_), "recv");
  return r;
}

Request Communicator::ibarrier() const {
  Request r = make("barrier");
  if (!uses_mpi()) return r;
  check(MPI_Ibarrier(comm_, &r.req_), "barrier");
  return r;
}

Groups make_groups(const Communicator& world, int dp, int ep, int cp) {
  ZAYA_CHECK(ep >= 1 && cp >= 1 && dp >= 0, "dist: bad layout dp=", dp, " ep=", ep, " cp=", cp);
  if (dp == 0) {
    ZAYA_CHECK(world.size() % (ep * cp) == 0, "dist: world of ", world.size(), " ranks is not a multiple of ep*cp = ",
               ep * cp);
    dp = world.size() / (ep * cp);
  }
  ZAYA_CHECK(dp * ep * cp == world.size(), "dist: layout dp=", dp, " x ep=", ep, " x cp=", cp, " = ", dp * ep * cp,
             " ranks, but the world has ", world.size());
  Groups g;
  g.world = world;
  Layout& L = g.layout;
  L.dp = dp, L.ep = ep, L.cp = cp;
  const int r = world.rank();
  L.cp_rank = r % cp;
  L.ep_rank = (r / cp) % ep;
  L.dp_rank = r / (cp * ep);
  // color = the coordinates the group shares; key = the coordinate it varies over.
  g.dp = world.split(L.ep_rank * cp + L.cp_rank, L.dp_rank, "dp");
  g.ep = world.split(L.dp_rank * cp + L.cp_rank, L.ep_rank, "ep");
  g.cp = world.split(L.dp_rank * ep + L.ep_rank, L.cp_rank, "cp");
  return g;
}

}  // namespace zaya::comm
