// libFuzzer target: the safetensors reader (src/ckpt/safetensors.cpp). The input is a
// whole .safetensors file (8-byte header length, JSON header, data). Every tensor the reader
// accepts is then read back as float and double into a buffer sized by the bytes its
// data_offsets cover: a header whose shape claims more elements than those bytes (e.g. an
// overflowing shape product) shows up as a heap overflow.
#include <cstdint>
#include <vector>

#include "ckpt/safetensors.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya_fuzz::write_file("model.safetensors", {reinterpret_cast<const char*>(data), size});
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::SafetensorsFile f(path);
    for (const auto& [k, v] : f.metadata()) (void)k.size(), (void)v.size();
    for (const zaya::TensorEntry& e : f.tensors()) {
      if (f.find(e.name) != &e) __builtin_trap();  // the index must find what the list holds
      const size_t bytes = e.end - e.begin;
      const size_t fits = bytes / zaya::dtype_size(e.dtype);
      volatile uint8_t sink = 0;
      for (size_t i = 0; i < bytes; ++i) sink = sink ^ f.data(e)[i];  // inside the mapping
      if (e.dtype == zaya::DType::F32 || e.dtype == zaya::DType::F64 || e.dtype == zaya::DType::BF16 ||
          e.dtype == zaya::DType::F16) {
        std::vector<float> out(fits);
        ZAYA_FUZZ_EXPECT_ERRORS(f.read(e.name, out.data()));
        std::vector<double> out64(fits);
        ZAYA_FUZZ_EXPECT_ERRORS(f.read(e.name, out64.data(), e.shape));
      } else {
        std::vector<float> out(fits);
        ZAYA_FUZZ_EXPECT_ERRORS(f.read(e.name, out.data()));  // refused: not a float type
      }
    }
  });
  return 0;
}
