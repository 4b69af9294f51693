// zaya bench comm: collective micro-benchmarks over MPI with the nccl-tests conventions
// (doc/PERFORMANCE.md there): sizes, algbw = S / t, busbw = algbw x factor, #wrong from an
// element-by-element check of rank- and index-dependent data, out-of-place and in-place.
//
// Sizes follow nccl-tests: S is the size column; for reduce_scatter, all_gather and
// all_to_all it is the whole n-rank array (count rounded down to a multiple of n).
// MPI is initialised only inside run_comm (no other subcommand needs mpirun).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"

namespace zaya::bench {

enum class CommOp { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll, SendRecv };
enum class RedOp { Sum, Prod, Max, Min, Avg, None };
enum class TimeAgg { Rank0 = 0, Avg = 1, Min = 2, Max = 3 };

const std::vector<CommOp>& all_comm_ops();
const std::vector<CommOp>& paper_comm_ops();  // all_reduce, reduce_scatter, all_gather, broadcast
const char* op_name(CommOp op);
CommOp parse_op(const std::string& s);
// Payload types (core/dtype.h's I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16), in nccl-tests'
// spelling: "int8", ..., "half", "float", "double", "bfloat16".
using zaya::DType;       // the one enum (core/dtype.h)
using zaya::dtype_size;
const char* comm_dtype_name(DType t);
DType parse_dtype(const std::string& s);
const std::vector<DType>& all_dtypes();
const char* redop_name(RedOp r);
RedOp parse_redop(const std::string& s);
const std::vector<RedOp>& all_redops();  // sum, prod, max, min, avg
bool op_reduces(CommOp op);
bool op_rooted(CommOp op);

// busbw / algbw (nccl-tests): 2(n-1)/n all-reduce; (n-1)/n reduce-scatter, all-gather,
// all-to-all; 1 broadcast and send/recv.
double busbw_factor(CommOp op, int nranks);

// Element counts of one collective at a nominal size.
struct CollCounts {
  int64_t count = 0;       // the table's count column (elements of S)
  int64_t bytes = 0;       // S = count x type size, the size column
  int64_t send_count = 0;  // elements each rank sends from its send buffer
  int64_t recv_count = 0;  // elements each rank ends up with in its receive buffer
};
CollCounts coll_counts(CommOp op, int64_t size_bytes, DType t, int nranks);

// The size list: min, then x factor (factor > 1) or + increment, up to max (inclusive).
std::vector<int64_t> size_list(int64_t min_bytes, int64_t max_bytes, int64_t factor, int64_t increment);

// Data patterns and the check (pure, no MPI). Input element i of rank r is a small integer
// depending on (r, i) and the reduction, so reduced results are exact in every type.
double input_value(RedOp r, int rank, int64_t i);
// Fills rank's send buffer (send_count elements of t).
void fill_input(CommOp op, DType t, RedOp r, int rank, int nranks, int root, void* buf, int64_t send_count);
// Expected value of element j of rank's result.
double expected_value(CommOp op, DType t, RedOp r, int rank, int nranks, int root, int64_t j, int64_t recv_count);
// Number of elements of rank's result (recv_count elements) that differ from the expected.
int64_t count_wrong(CommOp op, DType t, RedOp r, int rank, int nranks, int root, const void* result,
                    int64_t recv_count);
double get_element(DType t, const void* buf, int64_t i);
void set_element(DType t, void* buf, int64_t i, double v);
uint16_t float_to_half(float f);

struct CommOptions {
  std::vector<CommOp> ops{CommOp::AllReduce};
  std::vector<DType> dtypes{DType::F32};
  std::vector<RedOp> redops{RedOp::Sum};
  int64_t min_bytes = 32 << 20, max_bytes = 32 << 20, factor = 1, increment = 1 << 20;
  int iters = 20, warmup = 5;
  int check = 1;
  int root = 0;
  TimeAgg agg = TimeAgg::Avg;
  std::string csv, json;
  bool break_reduction = false;  // debug: a user-defined reduction that drops contributions
  void validate() const;         // throws zaya::Error for bad flags
};

struct CommRow {
  std::string op, type, redop;
  int nranks = 0, root = -1;
  int64_t size_bytes = 0, count = 0;
  double time_us[2] = {0, 0}, algbw[2] = {0, 0}, busbw[2] = {0, 0};  // [0] out-of-place, [1] in-place
  int64_t wrong[2] = {-1, -1};                                        // -1: not checked
};

struct CommTable {
  std::string op, type, redop;
  int nranks = 0;
  std::vector<CommRow> rows;
  double avg_busbw = 0;
};

struct CommResult {
  std::vector<CommTable> tables;  // filled on every rank
  int64_t total_wrong = 0;
  int nranks = 0, rank = 0;
};

extern const char* const kCommCsvHeader;
std::vector<std::string> comm_csv_cells(const CommRow& r);
std::string comm_table_header(bool rooted);
std::string comm_table_row(const CommRow& r);
nlohmann::json comm_result_json(const CommResult& res, const CommOptions& o);

// Runs the benchmark (MPI_Init/MPI_Finalize inside when MPI is not yet initialised). Rank 0
// prints the tables to `out` and writes the CSV/JSON files.
CommResult run_comm(const CommOptions& o, std::FILE* out);

// comm-sweep: runs `zaya bench comm` under mpirun for 1, 2, 4, ... ranks and merges the CSVs.
struct SweepOptions {
  int max_ranks = 4;
  std::vector<CommOp> ops;  // default: the paper's four
  DType dtype = DType::F32;
  int64_t min_bytes = 8, max_bytes = 16 << 20, factor = 4;
  int iters = 10, warmup = 2, check = 1;
  std::string csv = "comm_sweep.csv";
  std::string plot_dir;   // default: the CSV's directory; "none": no plots
  std::string mpirun = "mpirun";
  std::string mpirun_args;  // extra arguments (default: --oversubscribe, as root --allow-run-as-root)
  std::string zaya_exe;     // default: this executable
};
void run_comm_sweep(const SweepOptions& o, std::FILE* out);

}  // namespace zaya::bench
