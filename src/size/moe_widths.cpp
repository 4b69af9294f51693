#include "size/moe_widths.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/params.h"

namespace zaya::size {
using json = nlohmann::json;

MoeWidthTable moe_width_table(const ModelConfig& cfg, const RunLayout& run, const HardwareProfile& hw,
                              const std::vector<int>& experts, const std::vector<int>& topks,
                              const std::vector<int>& batches, int context) {
  cfg.validate();
  MoeWidthTable t;
  t.batches = batches;
  t.context = context;
  const long budget = long(cfg.num_experts) * cfg.ffn_hidden_size;  // E * F at fixed D
  t.expert_params_per_layer = double(budget) * cfg.hidden_size * 1.5;
  for (int E : experts) {
    if (E <= 0 || budget % E || (budget / E) % 2) continue;
    const int F = int(budget / E);
    for (int k : topks) {
      if (k <= 0 || k > E) continue;
      ModelConfig c = cfg;
      c.num_experts = E;
      c.ffn_hidden_size = F;
      c.topk = k;
      RunLayout r = run;
      if (c.num_experts % r.ep) continue;
      MoeWidthRow row;
      row.experts = E;
      row.topk = k;
      row.ffn = F;
      row.reference = E == cfg.num_experts && k == cfg.topk;
      row.active_params = double(count_params(c).active);
      Workload w = build_workload(c, r);
      row.tokens_per_expert = w.tokens_per_expert;
      StepPrediction p = predict_step(w, hw);
      for (auto& g : p.gemms)
        if (g.group == "experts") {
          row.expert_gemm_s += g.forward_s + g.backward_s;
          if (g.name == "experts.fc1") row.expert_efficiency = g.forward_timing.efficiency;
        }
      row.step_s = p.step_s;
      row.tokens_per_s = p.tokens_per_s_per_device;
      row.mfu = p.mfu;
      for (int b : batches) row.decode.push_back(predict_decode(c, hw, b, context, r.skip_share));
      t.rows.push_back(row);
    }
  }
  if (t.rows.empty()) fail("--moe-widths: no expert count in the list divides E*F = ", budget, " into even widths");
  return t;
}

json moe_widths_to_json(const MoeWidthTable& t) {
  json rows = json::array();
  for (auto& r : t.rows) {
    json dec = json::array();
    for (auto& d : r.decode) dec.push_back(decode_to_json(d));
    rows.push_back({{"experts", r.experts},
                    {"topk", r.topk},
                    {"ffn_hidden_size", r.ffn},
                    {"expert_width", r.ffn / 2},
                    {"reference", r.reference},
                    {"active_params", r.active_params},
                    {"tokens_per_expert", r.tokens_per_expert},
                    {"expert_gemm_s", r.expert_gemm_s},
                    {"expert_fc1_efficiency", r.expert_efficiency},
                    {"step_time_s", r.step_s},
                    {"tokens_per_s_per_device", r.tokens_per_s},
                    {"mfu", r.mfu},
                    {"decode", dec}});
  }
  return {{"expert_params_per_layer", t.expert_params_per_layer},
          {"batches", t.batches},
          {"context", t.context},
          {"rows", rows}};
}

}  // namespace zaya::size
