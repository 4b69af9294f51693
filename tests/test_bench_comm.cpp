// zaya bench comm without MPI: busbw factors against hand values, counts, sizes, the data
// patterns and the element-by-element check (which must catch a wrong result).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/comm_bench.h"
#include "bench/common.h"
#include "core/bf16.h"
#include "core/error.h"

using namespace zaya::bench;

TEST(BenchComm, BusbwFactorsMatchNcclTests) {
  // Hand values from nccl-tests doc/PERFORMANCE.md: 2(n-1)/n, (n-1)/n, 1.
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::Broadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CommOp::SendRecv, 2), 1.0);
  EXPECT_THROW(busbw_factor(CommOp::AllReduce, 0), zaya::Error);
}

TEST(BenchComm, CountsFollowNcclTests) {
  CollCounts ar = coll_counts(CommOp::AllReduce, 64 << 20, DType::F32, 4);
  EXPECT_EQ(ar.count, 16 << 20);
  EXPECT_EQ(ar.send_count, 16 << 20);
  EXPECT_EQ(ar.recv_count, 16 << 20);
  // S is the whole n-rank array, rounded down to a multiple of n elements.
  CollCounts rs = coll_counts(CommOp::ReduceScatter, 1000, DType::F32, 3);
  EXPECT_EQ(rs.count, 249);
  EXPECT_EQ(rs.bytes, 996);
  EXPECT_EQ(rs.send_count, 249);
  EXPECT_EQ(rs.recv_count, 83);
  CollCounts ag = coll_counts(CommOp::AllGather, 1000, DType::F32, 3);
  EXPECT_EQ(ag.send_count, 83);
  EXPECT_EQ(ag.recv_count, 249);
  CollCounts bf = coll_counts(CommOp::Broadcast, 8, DType::BF16, 2);
  EXPECT_EQ(bf.count, 4);
  EXPECT_EQ(coll_counts(CommOp::AllToAll, 8, DType::F64, 2).count, 0);  // skipped row
}

TEST(BenchComm, SizeListsAndSizeSuffixes) {
  auto v = size_list(8, 64 << 20, 2, 0);
  ASSERT_EQ(v.size(), 24u);
  EXPECT_EQ(v.front(), 8);
  EXPECT_EQ(v.back(), 64 << 20);
  EXPECT_EQ(size_list(1 << 20, 3 << 20, 1, 1 << 20), (std::vector<int64_t>{1 << 20, 2 << 20, 3 << 20}));
  EXPECT_EQ(parse_size("64M", "-e"), 67108864);
  EXPECT_EQ(parse_size("8", "-b"), 8);
  EXPECT_EQ(parse_size("1K", "-b"), 1024);
  EXPECT_EQ(parse_size("2G", "-b"), int64_t(2) << 30);
  EXPECT_THROW(parse_size("12X", "-b"), zaya::Error);
  EXPECT_THROW(parse_size("", "-b"), zaya::Error);
  EXPECT_THROW(parse_size("M", "-b"), zaya::Error);
  EXPECT_THROW(size_list(64, 8, 2, 0), zaya::Error);
}

TEST(BenchComm, NamesParse) {
  EXPECT_EQ(parse_op("allreduce"), CommOp::AllReduce);
  EXPECT_EQ(parse_op("reduce_scatter"), CommOp::ReduceScatter);
  EXPECT_EQ(parse_op("all-gather"), CommOp::AllGather);
  EXPECT_EQ(parse_op("bcast"), CommOp::Broadcast);
  EXPECT_THROW(parse_op("reduce_everything"), zaya::Error);
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("float"), DType::F32);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_THROW(parse_dtype("float128"), zaya::Error);
  EXPECT_EQ(parse_redop("avg"), RedOp::Avg);
  EXPECT_THROW(parse_redop("xor"), zaya::Error);
  EXPECT_EQ(all_comm_ops().size(), 6u);
  EXPECT_EQ(paper_comm_ops().size(), 4u);
}

TEST(BenchComm, HalfConversion) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(1e6f), 0x7C00);
  EXPECT_EQ(float_to_half(0x1.0p-24f), 0x0001);
  EXPECT_EQ(float_to_half(0.1f), 0x2E66);
  for (int i = -2048; i <= 2048; ++i) EXPECT_EQ(zaya::from_fp16(float_to_half(float(i))), float(i));
}

namespace {

struct Bufs {
  std::vector<std::vector<char>> in;
  std::vector<char> out;
};

// Builds every rank's input for `op` and a correct result for `rank` by hand.
std::vector<char> reference_result(CommOp op, DType t, RedOp r, int rank, int n, int root, int64_t size_bytes,
                                   int64_t& recv_count) {
  CollCounts c = coll_counts(op, size_bytes, t, n);
  size_t ts = dtype_size(t);
  std::vector<std::vector<char>> in(size_t(n), std::vector<char>(size_t(c.send_count) * ts));
  for (int q = 0; q < n; ++q) fill_input(op, t, r, q, n, root, in[size_t(q)].data(), c.send_count);
  std::vector<char> out(size_t(c.recv_count) * ts);
  recv_count = c.recv_count;
  for (int64_t j = 0; j < c.recv_count; ++j) {
    double v = 0;
    switch (op) {
      case CommOp::AllReduce:
      case CommOp::ReduceScatter: {
        int64_t idx = op == CommOp::ReduceScatter ? rank * c.recv_count + j : j;
        v = get_element(t, in[0].data(), idx);
        for (int q = 1; q < n; ++q) {
          double x = get_element(t, in[size_t(q)].data(), idx);
          v = r == RedOp::Prod ? v * x : r == RedOp::Max ? std::max(v, x) : r == RedOp::Min ? std::min(v, x) : v + x;
        }
        if (r == RedOp::Avg) v = t == DType::F64 ? v / n : double(float(v) / float(n));
        break;
      }
      case CommOp::AllGather: v = get_element(t, in[size_t(j / c.send_count)].data(), j % c.send_count); break;
      case CommOp::Broadcast: v = get_element(t, in[size_t(root)].data(), j); break;
      case CommOp::AllToAll: {
        int64_t blk = c.recv_count / n;
        v = get_element(t, in[size_t(j / blk)].data(), rank * blk + j % blk);
        break;
      }
      case CommOp::SendRecv: v = get_element(t, in[size_t((rank + n - 1) % n)].data(), j); break;
    }
    set_element(t, out.data(), j, v);
  }
  return out;
}

}  // namespace

TEST(BenchComm, CheckAcceptsCorrectResultsAndCountsWrongOnes) {
  const int n = 3, root = 1;
  for (CommOp op : all_comm_ops()) {
    for (DType t : {DType::F32, DType::BF16, DType::I32, DType::F16, DType::F64}) {
      std::vector<RedOp> reds = op_reduces(op) ? all_redops() : std::vector<RedOp>{RedOp::None};
      for (RedOp r : reds) {
        if (r == RedOp::Avg && (t == DType::I32)) continue;  // integer avg truncates: covered by the MPI script test
        for (int rank = 0; rank < n; ++rank) {
          int64_t rc = 0;
          std::vector<char> res = reference_result(op, t, r, rank, n, root, 3 * 1024, rc);
          ASSERT_GT(rc, 0);
          EXPECT_EQ(count_wrong(op, t, r, rank, n, root, res.data(), rc), 0)
              << op_name(op) << " " << comm_dtype_name(t) << " " << redop_name(r) << " rank " << rank;
          // A wrong element, then a dropped contribution on several (a broken reduction).
          set_element(t, res.data(), rc / 2, get_element(t, res.data(), rc / 2) + 7);
          EXPECT_EQ(count_wrong(op, t, r, rank, n, root, res.data(), rc), 1) << op_name(op) << " " << comm_dtype_name(t);
        }
      }
    }
  }
}

TEST(BenchComm, InputsDependOnRankAndIndex) {
  EXPECT_EQ(input_value(RedOp::Sum, 0, 0), 1.0);
  EXPECT_EQ(input_value(RedOp::Sum, 1, 2), 4.0);  // 1 + (7 + 6) % 5
  EXPECT_NE(input_value(RedOp::None, 0, 5), input_value(RedOp::None, 1, 5));
  EXPECT_NE(input_value(RedOp::None, 0, 5), input_value(RedOp::None, 0, 6));
  // Reduced sums stay exact small integers.
  EXPECT_EQ(expected_value(CommOp::AllReduce, DType::F32, RedOp::Sum, 0, 2, 0, 2, 8),
            input_value(RedOp::Sum, 0, 2) + input_value(RedOp::Sum, 1, 2));
  // A shifted all-gather block is wrong everywhere it differs.
  std::vector<float> ag(8);
  for (int j = 0; j < 8; ++j) ag[size_t(j)] = float(input_value(RedOp::None, j / 4, j));
  EXPECT_EQ(count_wrong(CommOp::AllGather, DType::F32, RedOp::None, 0, 2, 0, ag.data(), 8), 0);
  std::swap(ag[1], ag[5]);
  EXPECT_EQ(count_wrong(CommOp::AllGather, DType::F32, RedOp::None, 0, 2, 0, ag.data(), 8), 2);
}

TEST(BenchComm, CsvAndTableFormat) {
  EXPECT_STREQ(kCommCsvHeader,
               "op,nranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,"
               "ip_busbw,ip_wrong");
  CommRow r;
  r.op = "all_reduce";
  r.type = "float";
  r.redop = "sum";
  r.nranks = 2;
  r.size_bytes = 1024;
  r.count = 256;
  r.time_us[0] = 12.5;
  r.wrong[0] = 0;
  auto cells = comm_csv_cells(r);
  ASSERT_EQ(cells.size(), 15u);
  EXPECT_EQ(cells[10], "0");
  EXPECT_EQ(cells[14], "NA");
  std::string row = comm_table_row(r);
  EXPECT_NE(row.find("N/A"), std::string::npos);
  EXPECT_NE(row.find("12.50"), std::string::npos);
  EXPECT_NE(comm_table_header(false).find("#wrong"), std::string::npos);
}

TEST(BenchComm, BadFlagsGiveOneLineErrorsWithoutMpirun) {
  std::string cmd = std::string(ZAYA_BIN) + " bench comm -b 12X 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("zaya: error: -b: '12X'"), std::string::npos) << out;
  CommOptions o;
  o.iters = 0;
  EXPECT_THROW(o.validate(), zaya::Error);
}
