// libFuzzer target: GGUF files (src/quant/gguf.cpp: GgufFile, the header, metadata and
// tensor infos, bounds-checked against the mapped file). The input is the file. A file that
// opens has every tensor's first and last byte read (ASan: inside the mapping), its typed
// getters asked for every key, and its tensor names mapped back to HF names.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "quant/gguf.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = zaya_fuzz::write_file("model.gguf", {reinterpret_cast<const char*>(data), size});
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::quant::GgufFile g(p);
    volatile uint8_t sink = 0;
    for (const auto& t : g.tensors()) {
      if (t.bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.bytes - 1];
      if (g.data_offset() + t.offset + t.bytes > g.file_size()) __builtin_trap();  // the reader's bound
      ZAYA_FUZZ_EXPECT_ERRORS((void)zaya::quant::hf_name_from_gguf(t.name));
    }
    for (const auto& [k, v] : g.metadata()) {
      if (g.find(k) != &v) __builtin_trap();
      ZAYA_FUZZ_EXPECT_ERRORS((void)g.get_string(k));
      ZAYA_FUZZ_EXPECT_ERRORS((void)g.get_uint(k));
    }
    ZAYA_FUZZ_EXPECT_ERRORS((void)g.get_uint("general.alignment"));
  });
  return 0;
}
