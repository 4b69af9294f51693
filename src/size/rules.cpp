#include "size/rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "size/gemm_model.h"
#include "size/memory.h"

namespace zaya::size {
using json = nlohmann::json;

long round_up(long v, long m) { return (v + m - 1) / m * m; }

long pow2_factor(long v) { return v > 0 ? (v & -v) : 0; }

namespace {

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
  return buf;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

// Wave efficiency of the main GEMMs at a micro-batch of b sequences.
struct MainGemm {
  std::string name;
  GemmShape shape;
};

std::vector<MainGemm> main_gemms(const ModelConfig& cfg, const RunLayout& run) {
  Workload w = build_workload(cfg, run);
  std::vector<MainGemm> out;
  for (auto& g : w.gemms)
    if (g.name == "attn.linear_q" || g.name == "attn.o_proj" || g.name == "experts.fc1" || g.name == "experts.fc2" ||
        g.name == "lm_head")
      out.push_back({g.name, {g.M, g.N, g.K, g.batch}});
  return out;
}

}  // namespace

std::vector<RuleCheck> check_rules(const ModelConfig& cfg, const RunLayout& run, const HardwareProfile& hw) {
  std::vector<RuleCheck> out;
  auto add = [&](std::string rule, bool pass, std::string detail, std::string fix) {
    out.push_back({std::move(rule), pass, std::move(detail), pass ? "" : std::move(fix)});
  };
  const long W = hw.width_multiple, V = cfg.vocab_size, D = cfg.hidden_size, hd = cfg.head_dim;
  const long F = cfg.ffn_hidden_size, R = cfg.router_hidden, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;

  add("vocab size a multiple of 64", V % 64 == 0, cat("vocab_size = ", V, " (", V, " mod 64 = ", V % 64, ")"),
      cat("pad vocab_size to ", round_up(V, 64), " (", round_up(V, 64) - V, " unused rows)"));
  add("head dim a multiple of 64", hd % 64 == 0, cat("head dim = hidden / nominal heads = ", D, " / ",
                                                     cfg.num_attention_heads, " = ", hd),
      cat("use head dim ", std::max(64L, round_up(hd, 64)), " (num_attention_heads = ",
          std::max(1L, D / std::max(64L, round_up(hd, 64))), ")"));
  add(cat("hidden size a multiple of ", W, " (", hw.name, " width multiple)"), D % W == 0,
      cat("hidden_size = ", D, ", largest power-of-two factor ", pow2_factor(D)),
      cat("use hidden_size ", round_up(D, W)));
  add(cat("expert FFN widths (fc1 out F, fc2 in F/2) multiples of ", W), (F / 2) % W == 0,
      cat("F = ", F, ", F/2 = ", F / 2), cat("use ffn_hidden_size ", 2 * round_up(F / 2, W)));
  add(cat("query and key projection widths (Hq*hd, Hk*hd) multiples of ", W), (Hq * hd) % W == 0 && (Hk * hd) % W == 0,
      cat("Hq*hd = ", Hq * hd, ", Hk*hd = ", Hk * hd),
      cat("choose heads so that Hq*hd and Hk*hd are multiples of ", W, " (e.g. Hk = ", round_up(Hk * hd, W) / hd, ")"));
  add(cat("value projection halves (Hk*hd/2) multiples of ", W), (Hk * hd / 2) % W == 0,
      cat("val_proj1 / val_proj2 width = ", Hk * hd / 2),
      cat("fuse val_proj1 and val_proj2 into one [", Hk * hd, ", D] GEMM over x and shift the second half's output by "
          "one step (same result, width ", Hk * hd, ")"));
  add(cat("router width a multiple of ", std::min(W, 64L)), R % std::min(W, 64L) == 0, cat("R = ", R),
      cat("use zaya_mlp_expansion ", round_up(R, std::min(W, 64L))));

  // Token counts: b*s (per rank: b*s/cp) and tokens per expert against the tile edge.
  const long tile_m = std::max_element(hw.tiles.begin(), hw.tiles.end(), [](auto& a, auto& b) { return a.m < b.m; })->m;
  const long bs = long(run.micro_batch) * run.seq / run.cp;
  add(cat("b*s/cp divisible by a high power of two (>= the ", tile_m, "-row tile)"), bs % tile_m == 0,
      cat("b*s/cp = ", run.micro_batch, "*", run.seq, "/", run.cp, " = ", bs, ", power-of-two factor ", pow2_factor(bs)),
      cat("use --seq ", round_up(run.seq, tile_m * run.cp / std::max(1L, std::gcd(long(run.micro_batch), tile_m * run.cp))),
          " or a micro-batch that makes b*s/cp a multiple of ", tile_m));
  const double n_e = double(bs) * cfg.topk * (1 - run.skip_share) * run.ep / cfg.num_experts;
  const double n_e_pad = std::ceil(n_e / tile_m) * tile_m;
  add(cat("tokens per expert fill the ", tile_m, "-row tile (tile quantisation of the expert GEMMs)"),
      n_e / n_e_pad >= 0.9,
      cat("b*s/cp * topk * ep / E = ", num(n_e), " tokens per expert per micro-batch (", pct(n_e / n_e_pad),
          " of padded rows useful)"),
      cat("raise tokens per expert to a multiple of ", tile_m, " (micro-batch ",
          long(std::ceil(run.micro_batch * n_e_pad / std::max(n_e, 1e-9))), "), or fewer experts / higher top-k"));
  add("(b*a)/t and a/t integral (t = tensor-parallel size)", true,
      cat("t = 1: zaya.cpp has no tensor parallelism; b*a = ", run.micro_batch * Hq), "");
  add("sequence divisible by the context-parallel size", run.seq % run.cp == 0,
      cat("s = ", run.seq, ", cp = ", run.cp), cat("use --seq ", round_up(run.seq, run.cp)));

  // Wave quantisation of the main GEMMs on this profile's compute units.
  for (auto& g : main_gemms(cfg, run)) {
    WaveInfo wi = wave_quantisation(hw, g.shape);
    bool ok = wi.efficiency >= 0.85 || wi.waves >= 8;
    std::string fix;
    if (!ok) {
      for (int b = run.micro_batch + 1; b <= 8 * run.micro_batch && fix.empty(); ++b) {
        RunLayout r2 = run;
        r2.micro_batch = b;
        for (auto& h : main_gemms(cfg, r2)) {
          WaveInfo w2 = wave_quantisation(hw, h.shape);
          if (h.name == g.name && (w2.efficiency >= 0.85 || w2.waves >= 8)) {
            fix = cat("micro-batch ", b, " gives ", num(w2.waves), " waves, ", pct(w2.efficiency), " of the slots used");
            break;
          }
        }
      }
      if (fix.empty()) fix = "no micro-batch up to 8x fills the last wave; change the GEMM's width";
      fix += cat(" (", hw.compute_units, " units = ", pow2_factor(hw.compute_units), " x ",
                 hw.compute_units / pow2_factor(hw.compute_units), ": power-of-two tile counts leave a part-filled wave)");
    }
    add(cat("wave quantisation of ", g.name, " on ", hw.compute_units, " compute units"), ok,
        cat("[", g.shape.M, " x ", g.shape.K, "] x [", g.shape.K, " x ", g.shape.N, "]", g.shape.batch > 1 ? cat(" x", g.shape.batch) : "",
            ", tile ", wi.tile.m, "x", wi.tile.n, ": ", num(wi.tiles), " tiles in ", num(wi.waves), " waves, ",
            pct(wi.efficiency), " of the wave slots used"),
        fix);
  }
  // Micro-batch as large as fits.
  if (hw.memory_GB > 0) {
    Workload w = build_workload(cfg, run);
    MemoryPerRank m = memory_per_rank(w);
    RunLayout r2 = run;
    r2.micro_batch *= 2;
    MemoryPerRank m2 = memory_per_rank(build_workload(cfg, r2));
    const double cap = hw.memory_GB * 1e9;
    if (m.total() > cap)
      add("micro-batch fits in device memory", false, cat("needs ", num(m.total() / 1e9), " GB of ", hw.memory_GB, " GB"),
          "lower the micro-batch, enable --recompute, or raise --ep / --dp (ZeRO-1 shards optimizer state)");
    else
      add("micro-batch as large as fits", m2.total() > cap,
          cat("micro-batch ", run.micro_batch, " needs ", num(m.total() / 1e9), " GB; ", r2.micro_batch, " would need ",
              num(m2.total() / 1e9), " GB of ", hw.memory_GB, " GB"),
          cat("raise --micro-batch to ", r2.micro_batch, " or more"));
  }
  return out;
}

json rules_to_json(const std::vector<RuleCheck>& rules) {
  json a = json::array();
  for (auto& r : rules)
    a.push_back({{"rule", r.rule}, {"status", r.pass ? "pass" : "warn"}, {"detail", r.detail}, {"fix", r.fix}});
  return a;
}

}  // namespace zaya::size
