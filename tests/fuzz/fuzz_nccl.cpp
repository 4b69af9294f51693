// libFuzzer target: nccl-tests / rccl-tests text output, as `zaya size --network FILE` reads
// it (src/size/measured.cpp: parse_nccl_tests_output, then apply_network_measurements).
// The first byte picks the file name (the parser takes the collective from it when it can).
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "size/measured.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kNames[] = {"nccl.txt", "all_reduce_perf.txt", "reduce_scatter_perf.log", "all_gather.out",
                                 "alltoall_perf.txt", "broadcast_perf.txt", "sendrecv.txt", "reduce_perf.txt"};
  const std::string path = size ? kNames[data[0] % 8] : kNames[0];
  const std::string text(reinterpret_cast<const char*>(data) + (size ? 1 : 0), size ? size - 1 : 0);
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::size::NcclTestsRun run = zaya::size::parse_nccl_tests_output(text, path);
    zaya::size::HardwareProfile hw;
    zaya::size::apply_network_measurements(hw, run.rows, path);
    for (const auto& r : run.rows)
      (void)zaya::size::collective_steps(r.op, r.nranks), (void)zaya::size::collective_bus_factor(r.op, r.nranks);
  });
  return 0;
}
