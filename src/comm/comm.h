// Communicator over MPI (Open MPI), with process groups and a world of one.
//
// World of one: a plain `zaya train` (not under mpirun) gets a Communicator of size 1 that
// makes no MPI calls at all; every collective is then a local copy or a no-op. MPI is
// initialised only when the process was launched by mpirun (OMPI_COMM_WORLD_SIZE set) or
// when init_world(true) asks for it.
//
// Failure: the world communicator uses MPI_ERRORS_RETURN, so MPI errors come back as codes
// and become a zaya::Error naming the operation; every wait polls MPI_Test against a
// deadline (timeout(), default 300 s, env ZAYA_COMM_TIMEOUT or set_timeout()) so a dead or
// hung peer gives a clear error and a non-zero exit instead of a hang.
//
// Groups: world = DP x EP x CP with the rank layout
//     world_rank = (dp * EP + ep) * CP + cp
// (CP innermost: its halo/KV exchanges are the chattiest and go to the nearest ranks; DP
// outermost). The DP group of a rank = the ranks with its (ep, cp); EP group = same (dp, cp);
// CP group = same (dp, ep). The data-parallel sample shard of a rank is dp * EP + ep (EP ranks
// see different samples; CP ranks split the same samples' sequence).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zaya::comm {

enum class ReduceOp { Sum, Max, Min };

template <class T> MPI_Datatype mpi_type();
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_type<int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_type<int32_t>() { return MPI_INT32_T; }
template <> inline MPI_Datatype mpi_type<uint8_t>() { return MPI_UINT8_T; }

// A pending non-blocking operation. wait() honours the communicator's timeout. A request
// from a world of one is already complete.
class Request {
 public:
  Request() = default;
  bool pending() const { return req_ != MPI_REQUEST_NULL; }
  // Polls MPI_Test until done or the deadline; throws zaya::Error naming `what` on timeout.
  void wait();
  bool test();  // true when complete (non-blocking)

 private:
  friend class Communicator;
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::string what_;
  double timeout_ = 0;
  std::shared_ptr<void> keep_;  // buffers that must outlive the operation (e.g. int counts)
};
void wait_all(std::vector<Request>& reqs);

// Initialise the world (idempotent). force_mpi: initialise MPI even without mpirun.
void init_world(bool force_mpi = false);
void finalize_world();  // MPI_Finalize when this module initialised MPI
bool launched_by_mpirun();
double timeout();
void set_timeout(double seconds);
// Hard exit of the whole job after an error on this rank (MPI_Abort when MPI is up).
[[noreturn]] void abort_world(int code);

class Communicator {
 public:
  Communicator() = default;  // a world of one (self)
  static Communicator& world();  // init_world() first (done lazily with defaults)

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool uses_mpi() const { return comm_ != MPI_COMM_NULL; }
  const std::string& name() const { return name_; }
  // Sub-communicator of the ranks with the same color, ordered by key.
  Communicator split(int color, int key, const std::string& name) const;

  // Non-blocking collectives (sum unless stated). Buffers must stay alive until wait().
  // All-reduce in place over n elements.
  template <class T> Request iall_reduce(T* buf, size_t n, ReduceOp op = ReduceOp::Sum) const {
    return iall_reduce_raw(buf, n, mpi_type<T>(), op, sizeof(T));
  }
  // Reduce-scatter-v: send holds sum(counts) elements in rank order; recv gets counts[rank()].
  template <class T> Request ireduce_scatterv(const T* send, T* recv, const std::vector<size_t>& counts) const {
    return ireduce_scatterv_raw(send, recv, counts, mpi_type<T>(), sizeof(T));
  }
  // All-gather-v in place: buf holds rank r's counts[r] elements at displs[r]; afterwards all.
  template <class T> Request iall_gatherv(T* buf, const std::vector<size_t>& counts, const std::vector<size_t>& displs) const {
    return iall_gatherv_raw(buf, counts, displs, mpi_type<T>(), sizeof(T));
  }
  template <class T> Request ibroadcast(T* buf, size_t n, int root) const {
    return ibroadcast_raw(buf, n, mpi_type<T>(), root, sizeof(T));
  }
  // All-to-all-v: scounts/sdispls per destination, rcounts/rdispls per source (elements).
  template <class T> Request ialltoallv(const T* send, const std::vector<size_t>& scounts, const std::vector<size_t>& sdispls,
                                        T* recv, const std::vector<size_t>& rcounts, const std::vector<size_t>& rdispls) const {
    return ialltoallv_raw(send, scounts, sdispls, recv, rcounts, rdispls, mpi_type<T>(), sizeof(T));
  }
  template <class T> Request isend(const T* buf, size_t n, int dst, int tag) const {
    return isend_raw(buf, n, mpi_type<T>(), dst, tag);
  }
  template <class T> Request irecv(T* buf, size_t n, int src, int tag) const {
    return irecv_raw(buf, n, mpi_type<T>(), src, tag);
  }
  Request ibarrier() const;

  // Blocking forms (non-blocking + wait with the timeout).
  template <class T> void all_reduce(T* buf, size_t n, ReduceOp op = ReduceOp::Sum) const { iall_reduce(buf, n, op).wait(); }
  template <class T> void reduce_scatterv(const T* s, T* r, const std::vector<size_t>& c) const { ireduce_scatterv(s, r, c).wait(); }
  template <class T> void all_gatherv(T* b, const std::vector<size_t>& c, const std::vector<size_t>& d) const {
    iall_gatherv(b, c, d).wait();
  }
  template <class T> void broadcast(T* buf, size_t n, int root) const { ibroadcast(buf, n, root).wait(); }
  template <class T> void alltoallv(const T* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, T* r,
                                    const std::vector<size_t>& rc, const std::vector<size_t>& rd) const {
    ialltoallv(s, sc, sd, r, rc, rd).wait();
  }
  template <class T> void send(const T* buf, size_t n, int dst, int tag) const { isend(buf, n, dst, tag).wait(); }
  template <class T> void recv(T* buf, size_t n, int src, int tag) const { irecv(buf, n, src, tag).wait(); }
  void barrier() const { ibarrier().wait(); }

 private:
  Request iall_reduce_raw(void* buf, size_t n, MPI_Datatype t, ReduceOp op, size_t esize) const;
  Request ireduce_scatterv_raw(const void* s, void* r, const std::vector<size_t>& c, MPI_Datatype t, size_t esize) const;
  Request iall_gatherv_raw(void* b, const std::vector<size_t>& c, const std::vector<size_t>& d, MPI_Datatype t,
                           size_t esize) const;
  Request ibroadcast_raw(void* b, size_t n, MPI_Datatype t, int root, size_t esize) const;
  Request ialltoallv_raw(const void* s, const std::vector<size_t>& sc, const std::vector<size_t>& sd, void* r,
                         const std::vector<size_t>& rc, const std::vector<size_t>& rd, MPI_Datatype t, size_t esize) const;
  Request isend_raw(const void* b, size_t n, MPI_Datatype t, int dst, int tag) const;
  Request irecv_raw(void* b, size_t n, MPI_Datatype t, int src, int tag) const;
  Request make(const char* what) const;
  void check(int rc, const char* what) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string name_ = "self";
};

// The DP x EP x CP layout of the world and this rank's groups.
struct Layout {
  int dp = 1, ep = 1, cp = 1;
  int dp_rank = 0, ep_rank = 0, cp_rank = 0;
  int data_rank() const { return dp_rank * ep + ep_rank; }  // sample shard index
  int data_world() const { return dp * ep; }
};
struct Groups {
  Layout layout;
  Communicator world, dp, ep, cp;
};
// dp * ep * cp must equal world.size(); dp = 0 means world / (ep * cp).
Groups make_groups(const Communicator& world, int dp, int ep, int cp);

}  // namespace zaya::comm
