// libFuzzer target: hardware profile TOML (src/size/hardware.cpp: parse_hardware_profile,
// the configs/hardware/*.toml format `zaya size --hardware` reads). The input is the file.
// A profile that parses is written back (hardware_profile_to_toml, _to_json), and the TOML
// it writes must parse again: what the tool writes, it reads.
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "size/hardware.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ZAYA_FUZZ_EXPECT_ERRORS({
    const zaya::size::HardwareProfile hw = zaya::size::parse_hardware_profile(text, "hw.toml");
    (void)zaya::size::hardware_profile_to_json(hw).dump();
    const std::string again = zaya::size::hardware_profile_to_toml(hw);
    try {
      (void)zaya::size::parse_hardware_profile(again, "again.toml");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "a parsed profile does not parse once written: %s\n%s\n", e.what(), again.c_str());
      __builtin_trap();
    }
  });
  return 0;
}
