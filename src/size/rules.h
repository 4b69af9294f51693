// Co-design rule checks (Anthony et al., "The Case for Co-Designing Model Architectures with
// Hardware", 2024) for a model config, a run layout and a hardware profile: each rule passes
// or warns, and a warning carries the fix (e.g. the padded vocabulary size).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "size/hardware.h"
#include "size/workload.h"

namespace zaya::size {

struct RuleCheck {
  std::string rule;    // what is checked
  bool pass = true;
  std::string detail;  // the values found
  std::string fix;     // empty when it passes
};

std::vector<RuleCheck> check_rules(const ModelConfig& cfg, const RunLayout& run, const HardwareProfile& hw);

// Smallest multiple of m that is >= v.
long round_up(long v, long m);
// Largest power of two dividing v (v > 0).
long pow2_factor(long v);

nlohmann::json rules_to_json(const std::vector<RuleCheck>& rules);

}  // namespace zaya::size
