// zaya params --config FILE [--json]: parameter counts, total and active, with a breakdown.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "model/config.h"
#include "model/params.h"

namespace {

std::string commas(int64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

void run(const std::string& path, bool as_json) {
  zaya::ModelConfig cfg = zaya::load_model_config(path);
  zaya::ParamCounts c = zaya::count_params(cfg);
  if (as_json) {
    nlohmann::json j = {{"total", c.total},
                        {"active", c.active},
                        {"total_with_embedding", c.total_with_embedding()},
                        {"active_with_embedding", c.active_with_embedding()},
                        {"embedding", c.embedding},
                        {"breakdown",
                         {{"cca_core", c.cca_core},
                          {"attention_sublayers", c.attention_total},
                          {"expert", c.expert},
                          {"router", c.router},
                          {"router_first", c.router_first},
                          {"moe_sublayers", c.moe_total},
                          {"final_res_scale_and_norm", c.final_}}}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  auto row = [](const char* k, int64_t v) { std::printf("  %-52s %18s\n", k, commas(v).c_str()); };
  std::printf("%s: D=%d V=%d L=%d (%d sub-layers) Hq=%d Hk=%d hd=%d E=%d%s top-%d F=%d R=%d\n", cfg.name.c_str(),
              cfg.hidden_size, cfg.vocab_size, cfg.num_layers, cfg.num_sublayers(), cfg.num_q_heads,
              cfg.num_kv_heads, cfg.head_dim, cfg.num_experts, cfg.use_mod ? "+skip" : "", cfg.topk,
              cfg.ffn_hidden_size, cfg.router_hidden);
  row("one CCA core (q,k,v1,v2,conv0,conv1,temp,o)", c.cca_core);
  row("all attention sub-layers (incl. norms, res scaling)", c.attention_total);
  row("one expert", c.expert);
  row("one router (with EDA)", c.router);
  row("all MoE sub-layers (incl. norms, res scaling)", c.moe_total);
  row("final residual scaling + final norm", c.final_);
  row("embedding (tied)", c.embedding);
  row("total, without embedding", c.total);
  row("active per token, without embedding", c.active);
  row("total with embedding", c.total_with_embedding());
  row("active with embedding", c.active_with_embedding());
}

}  // namespace

ZAYA_COMMAND("params", "Parameter counts of a model config (total and active, with a breakdown)", [](CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  app.add_option("--config", *path, "model config: TOML, HF config.json or HF model directory")->required();
  app.add_flag("--json", *as_json, "print JSON");
  app.callback([=] { run(*path, *as_json); });
});
