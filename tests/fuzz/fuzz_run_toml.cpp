// libFuzzer target: a run config TOML (src/train/run_config.cpp: parse_run_config, the
// reader behind load_run_config). An accepted config's training plan is built too.
// model.config paths are resolved from the scratch directory, which holds model.toml
// (a valid tiny model) and config.json (its HF form), so both branches are reachable.
#include <unistd.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "train/run_config.h"

static zaya_fuzz::ScratchGuard guard;

namespace {

void setup() {
  static bool done = false;
  if (done) return;
  done = true;
  zaya_fuzz::write_file("model.toml", zaya_fuzz::kModelToml);
  const zaya::ModelConfig c = zaya::parse_model_config_toml(zaya_fuzz::kModelToml, "model.toml");
  zaya_fuzz::write_file("config.json", c.to_hf_json().dump());
  if (chdir(zaya_fuzz::scratch().c_str()) != 0) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  setup();
  const std::string text(reinterpret_cast<const char*>(data), size);
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::RunConfig c = zaya::parse_run_config(text, "run.toml");
    ZAYA_FUZZ_EXPECT_ERRORS((void)c.train_sources());
  });
  return 0;
}
