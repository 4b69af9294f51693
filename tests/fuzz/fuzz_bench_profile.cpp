// libFuzzer target: the bench outputs `zaya size --profile-from DIR` reads
// (src/size/measured.cpp: profile_from_bench_dir, parse_comm_csv; src/size/elementwise.cpp:
// read_elementwise_json). The input is up to six files cut at "\n====\n", in this order:
//   gemm.csv, mem.csv, peak.json, comm.csv, elementwise.json, nccl-tests text (nccl.txt)
// A part that is exactly "-" leaves that file out.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "size/measured.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kFiles[] = {"gemm.csv", "mem.csv", "peak.json", "comm.csv", "elementwise.json", "nccl.txt"};
  const auto parts = zaya_fuzz::split(data, size, 6);
  zaya_fuzz::clear();
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i] != "-") zaya_fuzz::write_file(kFiles[i], parts[i]);
  ZAYA_FUZZ_EXPECT_ERRORS((void)zaya::size::profile_from_bench_dir(zaya_fuzz::scratch()));
  if (parts.size() > 3 && parts[3] != "-")
    ZAYA_FUZZ_EXPECT_ERRORS((void)zaya::size::parse_comm_csv(zaya_fuzz::path_in("comm.csv")));
  return 0;
}
