// The `zaya size` report: every calculator for one model, layout and profile, gathered in one
// struct, printed as text or JSON. The text forms of the other modes live here too, so that
// src/cli/size.cpp only parses flags and picks a mode.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "model/params.h"
#include "size/hardware.h"
#include "size/memory.h"
#include "size/moe_widths.h"
#include "size/rules.h"
#include "size/search.h"
#include "size/step_time.h"
#include "size/workload.h"

namespace zaya::size {

struct SizeReport {
  std::string config_path;
  ModelConfig cfg;
  HardwareProfile hw;
  RunLayout run;
  ParamCounts params;
  FlopsPerToken flops;
  MemoryPerRank memory;
  KvCache kv;
  int context = 0;            // for KV bytes per sequence and decode
  StepPrediction step;        // this layout
  int devices = 0;            // K for the days figure
  double token_budget = 0;
  StepPrediction at_scale;    // the same layout with dp = K / cp
  MemoryPerRank at_scale_memory;
  double days = 0;
  std::vector<DecodePrediction> decode;
};

SizeReport size_report(const std::string& config_path, const ModelConfig& cfg, const RunLayout& run,
                       const HardwareProfile& hw, int devices, double token_budget,
                       const std::vector<int>& decode_batches, int context);

nlohmann::json report_to_json(const SizeReport& r);
std::string report_to_text(const SizeReport& r);

std::string profile_to_text(const HardwareProfile& hw);
std::string rules_to_text(const ModelConfig& cfg, const HardwareProfile& hw, const std::vector<RuleCheck>& rules);
std::string search_to_text(const SearchResult& s, const SearchTargets& t, const HardwareProfile& hw, size_t top);
std::string moe_widths_to_text(const ModelConfig& cfg, const HardwareProfile& hw, const MoeWidthTable& t);

// Number formatting shared by the text reports.
std::string with_commas(double v);
std::string si(double v, int digits = 3);  // 1.23 G, 45.6 M, ...
std::string gb(double bytes);              // "12.34 GB" (1e9)

}  // namespace zaya::size
