// Measured hardware profiles: a profile of this machine built from the CSVs `zaya bench`
// writes (gemm.csv, mem.csv, comm.csv, peak.json in one directory), and the network part of
// a profile from nccl-tests / rccl-tests text output (what cluster teams already have).
#pragma once
#include <string>
#include <vector>

#include "size/hardware.h"

namespace zaya::size {

// A directory of bench outputs. gemm.csv is required; peak.json or mem.csv gives the memory
// bandwidth; comm.csv and any nccl-tests text files (*.txt, *.log, *.out) give the network.
HardwareProfile profile_from_bench_dir(const std::string& dir);

// One nccl-tests / rccl-tests run, parsed from its text output.
struct NcclTestsRun {
  std::string op;        // normalised: all_reduce, reduce_scatter, all_gather, all_to_all, ...
  int nranks = 0;
  int hosts = 0;         // distinct host names in the "#  Rank" lines (0: not listed)
  double avg_busbw_GBps = 0;  // the "# Avg bus bandwidth" footer (0 when absent)
  std::vector<MeasuredCollective> rows;  // out-of-place figures per size
};
NcclTestsRun parse_nccl_tests_output(const std::string& text, const std::string& path);

// Collective rows from comm.csv (zaya bench comm).
std::vector<MeasuredCollective> parse_comm_csv(const std::string& path);

// Replaces the network part of `hw` with an alpha-beta fit of measured collectives: per
// link class (intra-node rows, inter-node rows), bandwidth = the best bus bandwidth and
// latency = the smallest message's time per ring step. Keeps the rows for interpolation.
void apply_network_measurements(HardwareProfile& hw, const std::vector<MeasuredCollective>& rows,
                                const std::string& source);
// Reads an nccl-tests text file and applies it as the network part of `hw`.
void apply_nccl_tests_file(HardwareProfile& hw, const std::string& path);

// Normalised collective name ("allreduce", "all_reduce_perf" -> "all_reduce").
std::string normalise_collective_name(const std::string& name);
// Ring steps and the bus-bandwidth factor of a collective over n ranks (nccl-tests
// PERFORMANCE.md): all_reduce 2(n-1) steps and 2(n-1)/n; reduce_scatter, all_gather,
// all_to_all n-1 steps and (n-1)/n; others 1 and 1.
int collective_steps(const std::string& op, int n);
double collective_bus_factor(const std::string& op, int n);

}  // namespace zaya::size
