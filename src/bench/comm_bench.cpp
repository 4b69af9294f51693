// zaya bench comm: the MPI side (buffers, timing loop, check) and the nccl-tests table.
#include "bench/comm_bench.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/comm_types.h"
#include "bench/common.h"
#include "core/error.h"

namespace zaya::bench {

const char* const kCommCsvHeader =
    "op,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,"
    "ip_time_us,ip_algbw,ip_busbw,ip_wrong";

void CommOptions::validate() const {
  if (ops.empty()) fail("--op: no collective selected");
  if (dtypes.empty()) fail("-d: no dtype selected");
  if (redops.empty()) fail("-o: no reduction op selected");
  if (iters < 1) fail("-n: iterations must be >= 1 (got ", iters, ")");
  if (warmup < 0) fail("-w: warm-up iterations must be >= 0 (got ", warmup, ")");
  if (check < 0) fail("-c: expected 0 or 1 (got ", check, ")");
  if (root < 0) fail("-r: root must be >= 0 (got ", root, ")");
  size_list(min_bytes, max_bytes, factor, increment);
  if (max_bytes > int64_t(INT_MAX)) fail("-e: ", max_bytes, " bytes is beyond MPI's int counts (2 GiB)");
}

namespace {

// ---- MPI types and reduction ops ----

template <class T>
MPI_Datatype mpi_type_of() {
  if constexpr (std::is_same_v<T, int8_t>) return MPI_INT8_T;
  else if constexpr (std::is_same_v<T, uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, int32_t>) return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, uint32_t>) return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else return MPI_UINT16_T;  // bf16, half: 2-byte storage, reduced by user-defined ops
}

// A user-defined reduction for T. Broken drops the incoming contribution of every 4th
// element of each chunk (the debug fault that the #wrong column must catch).
template <class T, int R, bool Broken>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int k = 0; k < *len; ++k) {
    if (Broken && k % 4 == 1) continue;
    if constexpr (is_16bit_float<T>) {
      float x = float(load(a[k])), y = float(load(b[k])), z;
      if (R == int(RedOp::Prod)) z = x * y;
      else if (R == int(RedOp::Max)) z = std::max(x, y);
      else if (R == int(RedOp::Min)) z = std::min(x, y);
      else z = x + y;
      b[k] = store<T>(z);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (R == int(RedOp::Prod)) b[k] = a[k] * b[k];
      else if (R == int(RedOp::Max)) b[k] = std::max(a[k], b[k]);
      else if (R == int(RedOp::Min)) b[k] = std::min(a[k], b[k]);
      else b[k] = a[k] + b[k];
    } else {  // integers wrap, as MPI's built-in ops do
      using U = std::make_unsigned_t<T>;
      if (R == int(RedOp::Prod)) b[k] = T(uint64_t(U(a[k])) * uint64_t(U(b[k])));
      else if (R == int(RedOp::Max)) b[k] = std::max(a[k], b[k]);
      else if (R == int(RedOp::Min)) b[k] = std::min(a[k], b[k]);
      else b[k] = T(uint64_t(U(a[k])) + uint64_t(U(b[k])));
    }
  }
}

struct OpCache {
  std::vector<MPI_Op> created;
  ~OpCache() = default;
  void free_all() {
    for (MPI_Op& o : created) MPI_Op_free(&o);
    created.clear();
  }
};

template <class T, int R, bool B>
MPI_Op make_op(OpCache& c) {
  MPI_Op op;
  MPI_Op_create(&user_reduce<T, R, B>, 1, &op);
  c.created.push_back(op);
  return op;
}

template <class T, bool B>
MPI_Op user_op(RedOp r, OpCache& c) {
  switch (r) {
    case RedOp::Prod: return make_op<T, int(RedOp::Prod), B>(c);
    case RedOp::Max: return make_op<T, int(RedOp::Max), B>(c);
    case RedOp::Min: return make_op<T, int(RedOp::Min), B>(c);
    default: return make_op<T, int(RedOp::Sum), B>(c);  // sum, and avg (= sum, then / n)
  }
}

template <class T>
MPI_Op mpi_op_of(RedOp r, bool broken, OpCache& c) {
  if (broken) return user_op<T, true>(r, c);
  if constexpr (is_16bit_float<T>) return user_op<T, false>(r, c);
  switch (r) {
    case RedOp::Prod: return MPI_PROD;
    case RedOp::Max: return MPI_MAX;
    case RedOp::Min: return MPI_MIN;
    default: return MPI_SUM;
  }
}

struct Buffer {
  std::unique_ptr<char, void (*)(void*)> p{nullptr, std::free};
  explicit Buffer(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64 + 64;
    p.reset(static_cast<char*>(std::aligned_alloc(64, n)));
    if (!p) fail("cannot allocate ", n, " bytes for the communication buffers");
    std::memset(p.get(), 0, n);  // first touch
  }
  char* get() const { return p.get(); }
};

// One collective on the current buffers.
struct Coll {
  CommOp op;
  MPI_Datatype type;
  MPI_Op mop;
  RedOp red;
  int rank, n, root;
  size_t tsize;
  CollCounts c;
  char *send, *recv;
  DType dt;

  void run(bool inplace) const {
    int sc = int(c.send_count), rc = int(c.recv_count);
    switch (op) {
      case CommOp::AllReduce:
        MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, sc, type, mop, MPI_COMM_WORLD);
        break;
      case CommOp::ReduceScatter:
        MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : send, recv, rc, type, mop, MPI_COMM_WORLD);
        break;
      case CommOp::AllGather:
        MPI_Allgather(inplace ? MPI_IN_PLACE : send, sc, type, recv, sc, type, MPI_COMM_WORLD);
        break;
      case CommOp::Broadcast:  // out-of-place: the root sends from its send buffer
        MPI_Bcast(inplace ? recv : (rank == root ? send : recv), sc, type, root, MPI_COMM_WORLD);
        break;
      case CommOp::AllToAll:
        MPI_Alltoall(inplace ? MPI_IN_PLACE : send, sc / n, type, recv, rc / n, type, MPI_COMM_WORLD);
        break;
      case CommOp::SendRecv: {
        int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
        if (inplace)
          MPI_Sendrecv_replace(recv, sc, type, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
          MPI_Sendrecv(send, sc, type, next, 0, recv, rc, type, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
      }
    }
    if (red == RedOp::Avg && op_reduces(op)) {  // MPI has no avg: sum, then divide locally
      dispatch(dt, [&](auto tag) {
        using T = decltype(tag);
        T* p = reinterpret_cast<T*>(recv);
        for (int64_t i = 0; i < c.recv_count; ++i) p[i] = avg_div(p[i], n);
      });
    }
  }

  // Puts the input where this variant reads it.
  void prepare(bool inplace) const {
    if (!inplace) {
      fill_input(op, dt, red, rank, n, root, send, c.send_count);
      std::memset(recv, 0, size_t(c.recv_count) * tsize);
      return;
    }
    switch (op) {
      case CommOp::AllGather:
        std::memset(recv, 0, size_t(c.recv_count) * tsize);
        fill_input(op, dt, red, rank, n, root, recv + size_t(rank) * c.send_count * tsize, c.send_count);
        break;
      case CommOp::Broadcast:
        if (rank == root) fill_input(op, dt, red, rank, n, root, recv, c.send_count);
        else std::memset(recv, 0, size_t(c.recv_count) * tsize);
        break;
      default: fill_input(op, dt, red, rank, n, root, recv, c.send_count); break;
    }
  }

  const void* result(bool inplace) const {
    if (op == CommOp::Broadcast && !inplace && rank == root) return send;
    return recv;
  }
};

double aggregate_time(double t, TimeAgg agg, int n) {
  double out = t;
  switch (agg) {
    case TimeAgg::Rank0: MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case TimeAgg::Avg:
      MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      out /= n;
      break;
    case TimeAgg::Min: MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD); break;
    case TimeAgg::Max: MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); break;
  }
  return out;
}

struct MpiSession {
  bool owned = false;
  MpiSession() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      MPI_Init(nullptr, nullptr);
      owned = true;
    }
  }
  ~MpiSession() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (owned && !fin) MPI_Finalize();
  }
};

std::string time_str(double us) {
  char b[32];
  if (us >= 10000.0) std::snprintf(b, sizeof b, "%7.0f", us);
  else if (us >= 100.0) std::snprintf(b, sizeof b, "%7.1f", us);
  else std::snprintf(b, sizeof b, "%7.2f", us);
  return b;
}

const char* agg_name(TimeAgg a) {
  switch (a) {
    case TimeAgg::Rank0: return "rank 0";
    case TimeAgg::Avg: return "average over ranks";
    case TimeAgg::Min: return "minimum over ranks";
    case TimeAgg::Max: return "maximum over ranks";
  }
  return "?";
}

}  // namespace

std::string comm_table_header(bool) {
  return "#                                                              out-of-place                       in-place          \n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
         "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
}

std::string comm_table_row(const CommRow& r) {
  char b[256];
  int len = std::snprintf(b, sizeof b, "%12lld  %12lld  %8s  %6s  %6d", (long long)r.size_bytes, (long long)r.count,
                          r.type.c_str(), r.redop.c_str(), r.root);
  std::string s(b, size_t(len));
  for (int v = 0; v < 2; ++v) {
    std::string w = r.wrong[v] < 0 ? "N/A" : std::to_string(r.wrong[v]);
    len = std::snprintf(b, sizeof b, "  %7s  %6.2f  %6.2f  %5s", time_str(r.time_us[v]).c_str(), r.algbw[v], r.busbw[v],
                        w.c_str());
    s += std::string(b, size_t(len));
  }
  return s + "\n";
}

std::vector<std::string> comm_csv_cells(const CommRow& r) {
  auto w = [](int64_t x) { return x < 0 ? std::string("NA") : std::to_string(x); };
  return {r.op,
          std::to_string(r.nranks),
          std::to_string(r.size_bytes),
          std::to_string(r.count),
          r.type,
          r.redop,
          std::to_string(r.root),
          fmt(r.time_us[0], 4),
          fmt(r.algbw[0], 6),
          fmt(r.busbw[0], 6),
          w(r.wrong[0]),
          fmt(r.time_us[1], 4),
          fmt(r.algbw[1], 6),
          fmt(r.busbw[1], 6),
          w(r.wrong[1])};
}

nlohmann::json comm_result_json(const CommResult& res, const CommOptions& o) {
  nlohmann::json j;
  j["nranks"] = res.nranks;
  j["iters"] = o.iters;
  j["warmup"] = o.warmup;
  j["check"] = o.check;
  j["timing"] = agg_name(o.agg);
  j["total_wrong"] = res.total_wrong;
  j["tables"] = nlohmann::json::array();
  for (const auto& t : res.tables) {
    nlohmann::json jt = {{"op", t.op}, {"type", t.type}, {"redop", t.redop}, {"nranks", t.nranks},
                         {"avg_busbw", t.avg_busbw}, {"rows", nlohmann::json::array()}};
    for (const auto& r : t.rows) {
      nlohmann::json jr = {{"size_bytes", r.size_bytes}, {"count", r.count}, {"root", r.root}};
      const char* tag[2] = {"out_of_place", "in_place"};
      for (int v = 0; v < 2; ++v)
        jr[tag[v]] = {{"time_us", r.time_us[v]}, {"algbw", r.algbw[v]}, {"busbw", r.busbw[v]},
                      {"wrong", r.wrong[v] < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong[v])}};
      jt["rows"].push_back(jr);
    }
    j["tables"].push_back(jt);
  }
  return j;
}

CommResult run_comm(const CommOptions& o, std::FILE* out) {
  o.validate();
  MpiSession mpi;
  CommResult res;
  MPI_Comm_rank(MPI_COMM_WORLD, &res.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &res.nranks);
  const int rank = res.rank, n = res.nranks;
  if (o.root >= n) fail("-r: root ", o.root, " is not a rank (", n, " ranks)");
  const bool lead = rank == 0;
  std::vector<int64_t> sizes = size_list(o.min_bytes, o.max_bytes, o.factor, o.increment);

  if (lead) {
    std::fprintf(out, "# zaya bench comm: nranks %d minBytes %lld maxBytes %lld step: %lld(%s) warmup iters: %d iters: %d validation: %d\n",
                 n, (long long)o.min_bytes, (long long)o.max_bytes, (long long)(o.factor > 1 ? o.factor : o.increment),
                 o.factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
    std::fprintf(out, "# MPI collectives over MPI_COMM_WORLD; time: %s%s\n#\n# Using ranks\n", agg_name(o.agg),
                 o.break_reduction ? "; DEBUG: broken reduction (#wrong must be > 0)" : "");
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < n; ++r) {  // rank 0 gathers the rank lines so they print in order
    char line[320];
    std::snprintf(line, sizeof line, "#  Rank %2d Pid %6d on %s\n", rank, int(getpid()), host);
    if (r == 0 && lead) std::fputs(line, out);
    if (r > 0) {
      if (rank == r) MPI_Send(line, int(sizeof line), MPI_CHAR, 0, 7, MPI_COMM_WORLD);
      if (lead) {
        MPI_Recv(line, int(sizeof line), MPI_CHAR, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        std::fputs(line, out);
      }
    }
  }
  if (lead) std::fputs("#\n", out);

  size_t max_bytes = size_t(o.max_bytes) + 64;
  Buffer send(max_bytes), recv(max_bytes);
  OpCache ops_made;
  CsvWriter csv;
  std::string open_error;  // rank 0 opens the CSV; every rank must learn if it failed, or they would hang
  if (lead) {
    try {
      csv = CsvWriter(o.csv, kCommCsvHeader);
    } catch (const Error& e) {
      open_error = e.what();
    }
  }
  int open_ok = open_error.empty();
  MPI_Bcast(&open_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  // Both messages name --csv: mpirun may stop the other ranks before they print theirs.
  if (!open_ok)
    fail(lead ? "could not open --csv '" + o.csv + "': " + open_error
              : std::string("rank 0 could not open --csv '") + o.csv + "'");

  for (CommOp op : o.ops) {
    for (DType dt : o.dtypes) {
      std::vector<RedOp> reds = op_reduces(op) ? o.redops : std::vector<RedOp>{RedOp::None};
      for (RedOp red : reds) {
        CommTable table;
        table.op = op_name(op);
        table.type = comm_dtype_name(dt);
        table.redop = redop_name(red);
        table.nranks = n;
        if (lead) std::fprintf(out, "# %s\n%s", table.op.c_str(), comm_table_header(op_rooted(op)).c_str());
        Coll coll{};
        coll.op = op;
        coll.red = red;
        coll.rank = rank;
        coll.n = n;
        coll.root = o.root;
        coll.dt = dt;
        coll.tsize = dtype_size(dt);
        coll.send = send.get();
        coll.recv = recv.get();
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          coll.type = mpi_type_of<T>();
          coll.mop = op_reduces(op) ? mpi_op_of<T>(red, o.break_reduction, ops_made) : MPI_OP_NULL;
        });
        double bw_sum = 0;
        int bw_count = 0;
        for (int64_t size : sizes) {
          coll.c = coll_counts(op, size, dt, n);
          if (coll.c.count == 0) continue;
          CommRow row;
          row.op = table.op;
          row.type = table.type;
          row.redop = table.redop;
          row.nranks = n;
          row.root = op_rooted(op) ? o.root : -1;
          row.size_bytes = coll.c.bytes;
          row.count = coll.c.count;
          for (int v = 0; v < 2; ++v) {
            bool inplace = v == 1;
            coll.prepare(inplace);
            for (int i = 0; i < o.warmup; ++i) coll.run(inplace);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < o.iters; ++i) coll.run(inplace);
            double t = (MPI_Wtime() - t0) / o.iters;
            t = aggregate_time(t, o.agg, n);
            row.time_us[v] = t * 1e6;
            row.algbw[v] = double(row.size_bytes) / 1e9 / t;
            row.busbw[v] = row.algbw[v] * busbw_factor(op, n);
            bw_sum += row.busbw[v];
            ++bw_count;
            if (o.check) {  // fresh data, one run, element-by-element check on every rank
              coll.prepare(inplace);
              coll.run(inplace);
              long long w = count_wrong(op, dt, red, rank, n, o.root, coll.result(inplace), coll.c.recv_count), tw = 0;
              MPI_Allreduce(&w, &tw, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
              row.wrong[v] = tw;
              res.total_wrong += tw;
            }
          }
          if (lead) {
            std::fputs(comm_table_row(row).c_str(), out);
            std::fflush(out);
            csv.row(comm_csv_cells(row));
          }
          table.rows.push_back(row);
        }
        table.avg_busbw = bw_count ? bw_sum / bw_count : 0;
        if (lead) {
          std::fprintf(out, "# Avg bus bandwidth    : %g \n#\n", table.avg_busbw);
          std::fflush(out);
        }
        res.tables.push_back(std::move(table));
      }
    }
  }
  ops_made.free_all();
  if (lead && !o.json.empty()) write_json_file(o.json, comm_result_json(res, o));
  return res;
}

}  // namespace zaya::bench
