// libFuzzer target: `--ids` files, as `zaya score --ids FILE` reads them. The reader is
// read_ids(), a function in src/cli/score.cpp's anonymous namespace (there is no library
// function for it), so this file includes score.cpp with the subcommand registrar
// compiled out and calls read_ids() through a file in the scratch directory.
#include <cstdint>
#include <string>

#include "cli/command.h"
#undef ZAYA_COMMAND
#define ZAYA_COMMAND(name, help, setup) static_assert(true)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#include "cli/score.cpp"
#pragma clang diagnostic pop

#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = zaya_fuzz::write_file("ids.txt", {reinterpret_cast<const char*>(data), size});
  ZAYA_FUZZ_EXPECT_ERRORS({
    const std::vector<int32_t> ids = read_ids(p);
    if (ids.size() < 2) __builtin_trap();  // documented: at least 2 ids
    for (int32_t id : ids)
      if (id < 0) __builtin_trap();
  });
  return 0;
}
