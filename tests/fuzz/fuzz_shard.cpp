// libFuzzer target: token shards and a prepared data directory's meta.json
// (src/data/shard.cpp: ShardReader; src/train/run_config.cpp: RunConfig::resolve_data,
// which reads meta.json). The input is
//   shard bytes [ ==== meta.json ]
// The shard is opened, its tokens checked against its vocabulary and against a smaller
// limit, and every token read; meta.json is resolved as the data source "fuzz".
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "train/run_config.h"
#include "data/shard.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = zaya_fuzz::split(data, size, 2);
  const std::string shard = zaya_fuzz::write_file("train_00000.bin", parts[0]);
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::ShardReader r(shard);
    uint64_t sum = 0;
    for (uint32_t t : r.tokens()) sum += t;
    (void)sum;
    ZAYA_FUZZ_EXPECT_ERRORS(r.check_tokens());
    ZAYA_FUZZ_EXPECT_ERRORS(r.check_tokens(7));
    zaya::ShardReader moved(std::move(r));
    (void)moved.size();
  });
  if (parts.size() > 1) {
    zaya_fuzz::write_file("meta.json", parts[1]);
    ZAYA_FUZZ_EXPECT_ERRORS({
      zaya::RunConfig c;
      c.path = "run.toml";
      zaya::RunSource s;
      s.name = "fuzz";
      s.dir = zaya_fuzz::scratch();
      c.sources.push_back(s);
      c.resolve_data();
      (void)c.train_sources();
    });
  }
  return 0;
}
