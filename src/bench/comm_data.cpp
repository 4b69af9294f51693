// zaya bench comm without MPI: names, busbw factors, counts, data patterns and the check.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/comm_bench.h"
#include "bench/comm_types.h"

namespace zaya::bench {

namespace {
struct OpName {
  CommOp op;
  const char* name;
};
const OpName kOps[] = {{CommOp::AllReduce, "all_reduce"}, {CommOp::ReduceScatter, "reduce_scatter"},
                       {CommOp::AllGather, "all_gather"}, {CommOp::Broadcast, "broadcast"},
                       {CommOp::AllToAll, "all_to_all"},  {CommOp::SendRecv, "sendrecv"}};
struct TypeName {
  DType t;
  const char* name;
};
const TypeName kTypes[] = {{DType::I8, "int8"},   {DType::U8, "uint8"},   {DType::I32, "int32"},
                           {DType::U32, "uint32"}, {DType::I64, "int64"},   {DType::U64, "uint64"},
                           {DType::F16, "half"},   {DType::F32, "float"},   {DType::F64, "double"},
                           {DType::BF16, "bfloat16"}};
const char* kRedNames[] = {"sum", "prod", "max", "min", "avg", "none"};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}
}  // namespace

const std::vector<CommOp>& all_comm_ops() {
  static const std::vector<CommOp> v{CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                                     CommOp::Broadcast, CommOp::AllToAll,      CommOp::SendRecv};
  return v;
}
const std::vector<CommOp>& paper_comm_ops() {
  static const std::vector<CommOp> v{CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather, CommOp::Broadcast};
  return v;
}

const char* op_name(CommOp op) {
  for (const auto& o : kOps)
    if (o.op == op) return o.name;
  return "?";
}

CommOp parse_op(const std::string& s0) {
  std::string s = lower(s0);
  if (s == "allreduce") s = "all_reduce";
  if (s == "reducescatter") s = "reduce_scatter";
  if (s == "allgather") s = "all_gather";
  if (s == "bcast") s = "broadcast";
  if (s == "alltoall") s = "all_to_all";
  if (s == "send_recv") s = "sendrecv";
  for (const auto& o : kOps)
    if (s == o.name) return o.op;
  fail("unknown collective '", s0,
       "' (expected all_reduce, reduce_scatter, all_gather, broadcast, all_to_all or sendrecv)");
}

const char* comm_dtype_name(DType t) {
  for (const auto& x : kTypes)
    if (x.t == t) return x.name;
  return "?";
}
const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = [] {
    std::vector<DType> r;
    for (const auto& x : kTypes) r.push_back(x.t);
    return r;
  }();
  return v;
}

DType parse_dtype(const std::string& s0) {
  std::string s = lower(s0);
  if (s == "float32" || s == "fp32" || s == "f32") s = "float";
  if (s == "float64" || s == "fp64" || s == "f64") s = "double";
  if (s == "bf16") s = "bfloat16";
  if (s == "float16" || s == "fp16" || s == "f16") s = "half";
  if (s == "int") s = "int32";
  if (s == "char") s = "int8";
  for (const auto& x : kTypes)
    if (s == x.name) return x.t;
  fail("unknown dtype '", s0, "' (expected int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all)");
}

const char* redop_name(RedOp r) { return kRedNames[int(r)]; }
RedOp parse_redop(const std::string& s0) {
  std::string s = lower(s0);
  for (int i = 0; i < 5; ++i)
    if (s == kRedNames[i]) return RedOp(i);
  fail("unknown reduction op '", s0, "' (expected sum, prod, max, min, avg or all)");
}
const std::vector<RedOp>& all_redops() {
  static const std::vector<RedOp> v{RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
  return v;
}

bool op_reduces(CommOp op) { return op == CommOp::AllReduce || op == CommOp::ReduceScatter; }
bool op_rooted(CommOp op) { return op == CommOp::Broadcast; }

double busbw_factor(CommOp op, int n) {
  if (n <= 0) fail("busbw factor: nranks must be positive");
  switch (op) {
    case CommOp::AllReduce: return 2.0 * (n - 1) / n;
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
    case CommOp::AllToAll: return double(n - 1) / n;
    case CommOp::Broadcast:
    case CommOp::SendRecv: return 1.0;
  }
  return 1.0;
}

CollCounts coll_counts(CommOp op, int64_t size_bytes, DType t, int n) {
  CollCounts c;
  int64_t ts = int64_t(dtype_size(t));
  c.count = size_bytes / ts;
  switch (op) {
    case CommOp::AllReduce:
    case CommOp::Broadcast:
    case CommOp::SendRecv: c.send_count = c.recv_count = c.count; break;
    case CommOp::ReduceScatter:
      c.count = c.count / n * n;
      c.send_count = c.count;
      c.recv_count = c.count / n;
      break;
    case CommOp::AllGather:
      c.count = c.count / n * n;
      c.send_count = c.count / n;
      c.recv_count = c.count;
      break;
    case CommOp::AllToAll:
      c.count = c.count / n * n;
      c.send_count = c.recv_count = c.count;
      break;
  }
  c.bytes = c.count * ts;
  return c;
}

std::vector<int64_t> size_list(int64_t mn, int64_t mx, int64_t factor, int64_t inc) {
  if (mn <= 0) fail("-b: minimum size must be positive");
  if (mx < mn) fail("-e: maximum size (", mx, ") is below the minimum size (", mn, ")");
  std::vector<int64_t> v;
  for (int64_t s = mn; s <= mx;) {
    v.push_back(s);
    if (factor > 1) s *= factor;
    else if (inc > 0) s += inc;
    else fail("-f/-i: need a factor > 1 or an increment > 0");
  }
  return v;
}

double input_value(RedOp r, int rank, int64_t i) {
  switch (r) {
    case RedOp::Sum:
    case RedOp::Avg: return double(1 + (rank * 7 + i * 3) % 5);
    case RedOp::Prod: return double(1 + (rank + i) % 2);
    case RedOp::Max:
    case RedOp::Min: return double((rank * 13 + i * 5) % 29);
    case RedOp::None: return double((rank * 37 + i * 11) % 97);
  }
  return 0;
}

namespace {

// Source rank and source index of element j of rank's result (non-reducing collectives).
void source_of(CommOp op, int rank, int n, int root, int64_t j, int64_t recv_count, int& src, int64_t& idx) {
  switch (op) {
    case CommOp::AllGather: {
      int64_t chunk = recv_count / n;
      src = int(j / chunk);
      idx = j;
      return;
    }
    case CommOp::Broadcast: src = root; idx = j; return;
    case CommOp::AllToAll: {
      int64_t blk = recv_count / n;
      src = int(j / blk);
      idx = int64_t(rank) * blk + j % blk;
      return;
    }
    case CommOp::SendRecv: src = (rank - 1 + n) % n; idx = j; return;
    default: src = rank; idx = j; return;
  }
}

template <class T>
T expected_typed(CommOp op, RedOp r, int rank, int n, int root, int64_t j, int64_t recv_count) {
  if (!op_reduces(op)) {
    int src;
    int64_t idx;
    source_of(op, rank, n, root, j, recv_count, src, idx);
    return store<T>(input_value(RedOp::None, src, idx));
  }
  int64_t idx = op == CommOp::ReduceScatter ? int64_t(rank) * recv_count + j : j;
  if (r == RedOp::Max || r == RedOp::Min) {
    double v = input_value(r, 0, idx);
    for (int q = 1; q < n; ++q) v = r == RedOp::Max ? std::max(v, input_value(r, q, idx)) : std::min(v, input_value(r, q, idx));
    return store<T>(v);
  }
  if constexpr (std::is_integral_v<T>) {  // modular, as the wrapped integer reduction
    uint64_t acc = r == RedOp::Prod ? 1 : 0;
    for (int q = 0; q < n; ++q) {
      uint64_t x = uint64_t(int64_t(input_value(r, q, idx)));
      acc = r == RedOp::Prod ? acc * x : acc + x;
    }
    T s = T(acc);
    return r == RedOp::Avg ? avg_div(s, n) : s;
  } else {
    double acc = r == RedOp::Prod ? 1 : 0;  // small integers: exact in double
    for (int q = 0; q < n; ++q) acc = r == RedOp::Prod ? acc * input_value(r, q, idx) : acc + input_value(r, q, idx);
    T s = store<T>(acc);
    return r == RedOp::Avg ? avg_div(s, n) : s;
  }
}

template <class T>
bool same(const T& got, const T& want) {
  if constexpr (is_16bit_float<T>) {
    double g = load(got), w = load(want);
    double tol = std::is_same_v<T, bf16> ? 1e-2 : 1e-3;
    return std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
  } else {
    return std::memcmp(&got, &want, sizeof(T)) == 0;
  }
}

}  // namespace

// Fill and check run serially on purpose: OpenMP workers spinning after a parallel region
// would steal the cores that the other ranks are timing collectives on.
void fill_input(CommOp op, DType t, RedOp r, int rank, int n, int /*root*/, void* buf, int64_t send_count) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(buf);
    RedOp rr = op_reduces(op) ? r : RedOp::None;
    int64_t offset = op == CommOp::AllGather ? int64_t(rank) * send_count : 0;  // global index
    for (int64_t i = 0; i < send_count; ++i) p[i] = store<T>(input_value(rr, rank, offset + i));
    (void)n;
  });
}

double expected_value(CommOp op, DType t, RedOp r, int rank, int n, int root, int64_t j, int64_t recv_count) {
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    return load(expected_typed<T>(op, r, rank, n, root, j, recv_count));
  });
}

int64_t count_wrong(CommOp op, DType t, RedOp r, int rank, int n, int root, const void* result, int64_t recv_count) {
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(result);
    int64_t wrong = 0;
    for (int64_t j = 0; j < recv_count; ++j)
      if (!same(p[j], expected_typed<T>(op, r, rank, n, root, j, recv_count))) ++wrong;
    return wrong;
  });
}

double get_element(DType t, const void* buf, int64_t i) {
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    return load(static_cast<const T*>(buf)[i]);
  });
}

void set_element(DType t, void* buf, int64_t i, double v) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(buf)[i] = store<T>(v);
  });
}

uint16_t float_to_half(float f) {  // IEEE binary16, round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u);                 // NaN
  if (abs >= 0x47800000u) return uint16_t(sign | 0x7c00u);                // overflow -> inf
  if (abs < 0x38800000u) {                                                // subnormal or zero
    if (abs < 0x33000000u) return uint16_t(sign);
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int s = 126 - int(abs >> 23);  // value / 2^-24 = mant >> s
    uint32_t half = mant >> s, rem = mant & ((1u << s) - 1), mid = 1u << (s - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return uint16_t(sign | h);
}

}  // namespace zaya::bench
