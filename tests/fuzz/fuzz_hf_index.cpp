// libFuzzer target: an HF model directory's model.safetensors.index.json
// (src/ckpt/hf.cpp: hf_shard_list, open_hf_shards). The input is the index; the scratch
// directory also holds two valid shards, a.safetensors (tensors "x", "y") and
// b.safetensors (tensor "z"), for the index to name.
#include <cstdint>
#include <string>

#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

namespace {
void make_shards() {
  static bool done = false;
  if (done) return;
  done = true;
  const float x[6] = {0, 1, 2, 3, 4, 5}, y[2] = {6, 7}, z[3] = {8, 9, 10};
  zaya::SafetensorsWriter a;
  a.add_float("x", zaya::DType::F32, {2, 3}, x);
  a.add_float("y", zaya::DType::BF16, {2}, y);
  a.write(zaya_fuzz::path_in("a.safetensors"));
  zaya::SafetensorsWriter b;
  b.add_float("z", zaya::DType::F32, {3}, z);
  b.write(zaya_fuzz::path_in("b.safetensors"));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  make_shards();
  zaya_fuzz::write_file("model.safetensors.index.json", {reinterpret_cast<const char*>(data), size});
  ZAYA_FUZZ_EXPECT_ERRORS({
    (void)zaya::hf_shard_list(zaya_fuzz::scratch());
    zaya::HfShards shards = zaya::open_hf_shards(zaya_fuzz::scratch());
    for (const auto& t : shards.tensors)
      if (t.file->find(t.entry->name) != t.entry) __builtin_trap();
  });
  return 0;
}
