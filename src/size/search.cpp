#include "size/search.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "size/memory.h"
#include "size/step_time.h"

namespace zaya::size {
using json = nlohmann::json;

namespace {

bool same_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.hidden_size == b.hidden_size && a.num_layers == b.num_layers && a.head_dim == b.head_dim &&
         a.num_q_heads == b.num_q_heads && a.num_kv_heads == b.num_kv_heads && a.num_experts == b.num_experts &&
         a.ffn_hidden_size == b.ffn_hidden_size && a.topk == b.topk;
}

Candidate evaluate(const ModelConfig& cfg, const SearchTargets& t, const RunLayout& run, const HardwareProfile& hw) {
  Candidate c;
  c.cfg = cfg;
  c.params = count_params(cfg);
  RunLayout r = run;
  if (cfg.num_experts % r.ep) r.ep = 1;
  Workload w = build_workload(cfg, r);
  StepPrediction p = predict_step(w, hw);
  c.tokens_per_s = p.tokens_per_s_per_device;
  c.mfu = p.mfu;
  c.step_s = p.step_s;
  c.decode_s = predict_decode(cfg, hw, t.decode_batch, t.context, r.skip_share).seconds;
  c.memory_bytes = memory_per_rank(w).total();
  c.fits = hw.memory_GB <= 0 || c.memory_bytes <= hw.memory_GB * 1e9;
  auto within = [&](double v, double target) { return target <= 0 || std::fabs(v / target - 1) <= t.tolerance; };
  c.in_window = within(double(c.params.total), t.total) && within(double(c.params.active), t.active);
  return c;
}

bool dominates(const Candidate& a, const Candidate& b) {
  return a.tokens_per_s >= b.tokens_per_s && a.decode_s <= b.decode_s &&
         (a.tokens_per_s > b.tokens_per_s || a.decode_s < b.decode_s);
}

}  // namespace

SearchResult search_shapes(const ModelConfig& base, const ModelConfig& reference, const SearchSpace& space,
                           const SearchTargets& targets, const RunLayout& run, const HardwareProfile& hw) {
  if (targets.total <= 0 || targets.active <= 0) fail("--search needs --total and --active (parameters without embedding)");
  if (targets.active > targets.total) fail("--active (", targets.active, ") exceeds --total (", targets.total, ")");
  if (!(targets.tolerance > 0 && targets.tolerance < 1)) fail("--tolerance must be in (0, 1), got ", targets.tolerance);
  SearchResult res;
  for (int D : space.hidden)
    for (int hd : space.head_dims) {
      if (D % hd || (D / hd) % 2) continue;
      const int nominal = D / hd, Hq = nominal / 2;  // CCA: half the nominal heads as query heads
      for (int Hk : space.kv_heads) {
        if (Hk > Hq || Hq % Hk) continue;
        for (int E : space.experts)
          for (int width : space.expert_widths)
            for (int k : space.topks) {
              if (k > E) continue;
              for (int L : space.layers) {
                ModelConfig c = base;
                c.name = cat("D", D, "-L", L, "-hd", hd, "-q", Hq, "kv", Hk, "-E", E, "x", width, "-top", k);
                c.hidden_size = D;
                c.num_attention_heads = nominal;
                c.head_dim = hd;
                c.num_q_heads = Hq;
                c.num_kv_heads = Hk;
                c.num_layers = L;
                c.num_experts = E;
                c.ffn_hidden_size = 2 * width;
                c.topk = k;
                ++res.enumerated;
                ParamCounts pc = count_params(c);
                if (std::fabs(double(pc.total) / targets.total - 1) > targets.tolerance ||
                    std::fabs(double(pc.active) / targets.active - 1) > targets.tolerance)
                  continue;
                res.candidates.push_back(evaluate(c, targets, run, hw));
              }
            }
      }
    }
  res.reference = evaluate(reference, targets, run, hw);
  res.reference.reference = true;
  for (auto& c : res.candidates)
    if (same_shape(c.cfg, reference)) c.reference = true;
  // Ranks, domination counts and the Pareto front (over shapes that fit in memory).
  auto& cs = res.candidates;
  std::sort(cs.begin(), cs.end(), [](auto& a, auto& b) { return a.tokens_per_s > b.tokens_per_s; });
  std::vector<double> decodes;
  for (auto& c : cs) decodes.push_back(c.decode_s);
  std::sort(decodes.begin(), decodes.end());
  auto place = [&](Candidate& x) {
    x.rank_train = 1 + int(std::count_if(cs.begin(), cs.end(), [&](auto& c) {
                     return c.tokens_per_s > x.tokens_per_s && !(c.reference && same_shape(c.cfg, x.cfg));
                   }));
    x.rank_decode = 1 + int(std::lower_bound(decodes.begin(), decodes.end(), x.decode_s) - decodes.begin());
    x.dominated_by = int(std::count_if(cs.begin(), cs.end(), [&](auto& c) { return c.fits && dominates(c, x); }));
    x.pareto = x.fits && x.dominated_by == 0;
  };
  for (auto& c : cs) place(c);
  place(res.reference);
  res.pareto_count = int(std::count_if(cs.begin(), cs.end(), [](auto& c) { return c.pareto; }));
  return res;
}

json candidate_to_json(const Candidate& c) {
  return {{"name", c.cfg.name},
          {"hidden_size", c.cfg.hidden_size},
          {"layers", c.cfg.num_layers},
          {"head_dim", c.cfg.head_dim},
          {"q_heads", c.cfg.num_q_heads},
          {"kv_heads", c.cfg.num_kv_heads},
          {"experts", c.cfg.num_experts},
          {"expert_width", c.cfg.ffn_hidden_size / 2},
          {"topk", c.cfg.topk},
          {"total_params", c.params.total},
          {"active_params", c.params.active},
          {"tokens_per_s_per_device", c.tokens_per_s},
          {"mfu", c.mfu},
          {"step_time_s", c.step_s},
          {"decode_step_s", c.decode_s},
          {"memory_bytes", c.memory_bytes},
          {"fits", c.fits},
          {"in_window", c.in_window},
          {"pareto", c.pareto},
          {"reference", c.reference},
          {"rank_train", c.rank_train},
          {"rank_decode", c.rank_decode},
          {"dominated_by", c.dominated_by}};
}

json search_to_json(const SearchResult& r, size_t top) {
  json all = json::array(), front = json::array();
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (i < top) all.push_back(candidate_to_json(r.candidates[i]));
    if (r.candidates[i].pareto) front.push_back(candidate_to_json(r.candidates[i]));
  }
  return {{"enumerated", r.enumerated},
          {"in_window", r.candidates.size()},
          {"top_by_training_throughput", all},
          {"pareto_front", front},
          {"reference", candidate_to_json(r.reference)}};
}

}  // namespace zaya::size
