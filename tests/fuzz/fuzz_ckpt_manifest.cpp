// libFuzzer target: a training checkpoint's manifest.json (src/ckpt/checkpoint.cpp: the
// Checkpoint constructor, verify, read, checkpoint_model_config, checkpoint_tokenizer).
//
// Once per process the scratch directory gets a real checkpoint written by
// CheckpointWriter (root/step_00000007: params.safetensors with an F32 tensor cut into two
// slices and a BF16 tensor, tokenizer.json, latest). The input is
//   manifest.json [ ==== params.safetensors bytes ]
// i.e. the manifest, optionally followed by replacement bytes for the data file. Every
// tensor the manifest names is read whole into a buffer of its numel floats.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

namespace {
namespace fs = std::filesystem;

std::string root, step_dir, params_bytes;

std::string slurp(const std::string& p) {
  std::string s;
  if (std::FILE* f = std::fopen(p.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

void setup() {
  if (!root.empty()) return;
  root = zaya_fuzz::path_in("ckpt");
  static const float w[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  static const uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x4080};  // bf16 1, 2, 3, 4
  const std::string tok = zaya_fuzz::write_file("tokenizer.json", "{}");
  zaya::CheckpointWriter wr(root, 7, "fuzz");
  wr.add_f32("params.safetensors", "param/w", {3, 4}, 0, 5, w);
  wr.add_f32("params.safetensors", "param/w", {3, 4}, 5, 7, w + 5);
  wr.add("params.safetensors", "buffer/b", zaya::DType::BF16, {4}, 0, 4, b);
  wr.copy_file(tok, "tokenizer.json");
  nlohmann::json piece = wr.write_files();
  nlohmann::json header = {{"tokens", 1234},
                           {"state", {{"trainer", {{"rope_theta", 10000.0}}}}},
                           {"model_config", {{"toml", zaya_fuzz::kModelToml}}},
                           {"tokenizer", "tokenizer.json"}};
  step_dir = wr.commit(header, {piece});
  params_bytes = slurp(step_dir + "/params.safetensors");
  if (const char* out = std::getenv("ZAYA_FUZZ_WRITE_SEED")) {  // the corpus's first seed
    const std::string m = slurp(step_dir + "/manifest.json");
    std::FILE* f = std::fopen(out, "wb");
    if (!f || std::fwrite(m.data(), 1, m.size(), f) != m.size()) __builtin_trap();
    std::fclose(f);
  }
}

void put(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) __builtin_trap();
  std::fclose(f);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  setup();
  const auto parts = zaya_fuzz::split(data, size, 2);
  put(step_dir + "/manifest.json", parts[0]);
  put(step_dir + "/params.safetensors", parts.size() > 1 ? parts[1] : std::string_view(params_bytes));
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::Checkpoint ck(root);  // through `latest`
    ZAYA_FUZZ_EXPECT_ERRORS((void)ck.step());
    ZAYA_FUZZ_EXPECT_ERRORS(ck.verify());
    for (const zaya::Checkpoint::Tensor& t : ck.tensors()) {
      if (t.numel > (size_t(1) << 20)) continue;  // a buffer that large is the caller's choice
      std::vector<float> buf(t.numel);
      ZAYA_FUZZ_EXPECT_ERRORS(ck.read(t.name, buf.data()));
      if (t.numel >= 2) {
        std::vector<float> part(t.numel - 2);
        ZAYA_FUZZ_EXPECT_ERRORS(ck.read(t.name, part.data(), 1, t.numel - 2));
      }
    }
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::checkpoint_model_config(ck));
    ZAYA_FUZZ_EXPECT_ERRORS(zaya::checkpoint_tokenizer(ck));
  });
  return 0;
}
