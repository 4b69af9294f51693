// libFuzzer target: Megatron-LM indexed datasets (src/data/megatron.cpp: MegatronDataset).
// The input is
//   PREFIX.idx bytes [ ==== PREFIX.bin bytes ]
// (no .bin part: an empty .bin). The dataset is opened with its full validation; when it
// opens, every sequence's start and length are looked up, every token is read in blocks
// against a vocabulary limit and without one, and the position of a few tokens is mapped
// back to its sequence.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/megatron.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = zaya_fuzz::split(data, size, 2);
  zaya_fuzz::write_file("ds.idx", parts[0]);
  zaya_fuzz::write_file("ds.bin", parts.size() > 1 ? parts[1] : std::string_view());
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::MegatronDataset ds(zaya_fuzz::path_in("ds"));
    uint64_t sum = 0;
    for (uint64_t i = 0; i < std::min<uint64_t>(ds.sequences(), 4096); ++i)
      sum += ds.sequence_start(i) + ds.sequence_length(i);
    (void)sum;
    std::vector<int32_t> buf(64);
    for (uint64_t pos = 0; pos < ds.tokens(); pos += buf.size()) {
      const uint64_t n = std::min<uint64_t>(buf.size(), ds.tokens() - pos);
      ZAYA_FUZZ_EXPECT_ERRORS(ds.read(pos, n, buf.data()));
      ZAYA_FUZZ_EXPECT_ERRORS(ds.read(pos, n, buf.data(), 7));
      (void)ds.sequence_at(pos);
    }
    ZAYA_FUZZ_EXPECT_ERRORS(ds.read(ds.tokens(), 1, buf.data()));
  });
  zaya_fuzz::clear();
  return 0;
}
