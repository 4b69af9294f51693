#include "size/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya::size {
using json = nlohmann::json;

namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string ms(double s) { return fmt("%.3f", s * 1e3); }

std::string layout_line(const RunLayout& r, double tokens) {
  return fmt("dp=%d ep=%d cp=%d, micro-batch %d x seq %d (%.0f tokens per rank per micro-batch), grad-accum %d, %s, "
             "recompute %s, skip share %.2f, %s, attention %s, ZeRO-1 overlap %.0f%%",
             r.dp, r.ep, r.cp, r.micro_batch, r.seq, tokens, r.grad_accum, r.dtype.c_str(), r.recompute ? "on" : "off",
             r.skip_share, r.optimizer.c_str(), r.attention.c_str(),
             100 * r.overlap);
}

}  // namespace

std::string with_commas(double v) {
  std::string s = fmt("%.0f", v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

std::string si(double v, int digits) {
  const char* units[] = {"", " K", " M", " G", " T", " P", " E"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 6) {
    v /= 1000;
    ++u;
  }
  return fmt("%.*g%s", digits, v, units[u]);
}

std::string gb(double bytes) { return fmt("%.2f GB", bytes / 1e9); }

SizeReport size_report(const std::string& config_path, const ModelConfig& cfg, const RunLayout& run,
                       const HardwareProfile& hw, int devices, double token_budget,
                       const std::vector<int>& decode_batches, int context) {
  SizeReport r;
  r.config_path = config_path;
  r.cfg = cfg;
  r.hw = hw;
  r.run = run;
  r.params = count_params(cfg);
  Workload w = build_workload(cfg, run);
  r.flops = flops_per_token(w);
  r.memory = memory_per_rank(w);
  r.kv = kv_cache(cfg, 2);
  r.context = context;
  r.step = predict_step(w, hw);
  r.devices = devices > 0 ? devices : run.world();
  if (r.devices % run.cp) fail("--devices ", r.devices, " is not a multiple of --cp ", run.cp);
  if (token_budget <= 0) fail("--tokens must be positive, got ", token_budget);
  r.token_budget = token_budget;
  RunLayout scaled = run;
  scaled.dp = r.devices / run.cp;
  if (scaled.world() % scaled.ep) scaled.ep = 1;
  Workload ws = build_workload(cfg, scaled);
  r.at_scale = scaled.dp == run.dp ? r.step : predict_step(ws, hw);
  r.at_scale_memory = memory_per_rank(ws);
  r.days = r.at_scale.days(token_budget, r.devices);
  for (int b : decode_batches) r.decode.push_back(predict_decode(cfg, hw, b, context, run.skip_share));
  return r;
}

json report_to_json(const SizeReport& r) {
  const ParamCounts& c = r.params;
  json dec = json::array();
  for (auto& d : r.decode) dec.push_back(decode_to_json(d));
  Workload w = build_workload(r.cfg, r.run);
  return {{"config", r.config_path},
          {"model", r.cfg.name},
          {"hardware", hardware_profile_to_json(r.hw)},
          {"workload", workload_to_json(w)},
          {"params",
           {{"total", c.total},
            {"active", c.active},
            {"total_with_embedding", c.total_with_embedding()},
            {"active_with_embedding", c.active_with_embedding()},
            {"embedding", c.embedding}}},
          {"flops_per_token", flops_to_json(r.flops)},
          {"memory_per_rank", memory_to_json(r.memory, r.hw.memory_GB)},
          {"kv_cache", kv_to_json(r.kv, r.context)},
          {"step", step_to_json(r.step)},
          {"step_time_s", r.step.step_s},
          {"tokens_per_s", r.step.tokens_per_s_per_device},
          {"mfu", r.step.mfu},
          {"at_scale",
           {{"devices", r.devices},
            {"dp", r.devices / r.run.cp},
            {"token_budget", r.token_budget},
            {"step_time_s", r.at_scale.step_s},
            {"zero1_comm_s", r.at_scale.zero_comm_s},
            {"zero1_comm_exposed_s", r.at_scale.zero_comm_exposed_s},
            {"tokens_per_s_per_device", r.at_scale.tokens_per_s_per_device},
            {"mfu", r.at_scale.mfu},
            {"memory_per_rank", memory_to_json(r.at_scale_memory, r.hw.memory_GB)},
            {"days", r.days}}},
          {"decode", dec}};
}

std::string profile_to_text(const HardwareProfile& hw) {
  std::string o = fmt("%s (%s, from %s)\n", hw.name.c_str(), hw.kind.c_str(), hw.source.c_str());
  std::string peaks;
  for (auto& [k, v] : hw.peak_tflops) peaks += fmt("%s%s %.4g", peaks.empty() ? "" : ", ", k.c_str(), v);
  o += fmt("  peak TFLOP/s         %s\n", peaks.c_str());
  o += fmt("  compute units        %d; GEMM efficiency %.2f; width multiple %d; kernel overhead %.1f us\n",
           hw.compute_units, hw.gemm_efficiency, hw.width_multiple, hw.kernel_overhead_us);
  if (hw.elementwise.exp_f32_per_s > 0 || hw.elementwise.erf_f32_per_s > 0)
    o += fmt("  elementwise          %s exp/s, %s erf/s (float); kernels at %.4g GB/s\n",
             si(hw.elementwise.exp_f32_per_s).c_str(), si(hw.elementwise.erf_f32_per_s).c_str(),
             hw.elementwise.kernels_GBps);
  if (hw.measured_gemms()) o += fmt("  GEMM table           %zu measured rows (interpolated)\n", hw.gemm_table.size());
  else {
    std::string tiles;
    for (auto& t : hw.tiles) tiles += fmt("%s%dx%dx%d@%.2f", tiles.empty() ? "" : " ", t.m, t.n, t.k, t.efficiency);
    o += "  GEMM tiles           " + tiles + "\n";
  }
  o += fmt("  memory               %.4g GB at %.4g GB/s (x %.2f achievable)%s\n", hw.memory_GB, hw.memory_bandwidth_GBps,
           hw.memory_efficiency, hw.cache_MB > 0 ? fmt(", cache %.4g MB", hw.cache_MB).c_str() : "");
  o += fmt("  network              intra-node %.4g GB/s bus bw, %.3g us/step; inter-node %.4g GB/s, %.3g us/step; "
           "%d devices per node\n",
           hw.intra.bandwidth_GBps, hw.intra.latency_us, hw.inter.bandwidth_GBps, hw.inter.latency_us,
           std::min(hw.devices_per_node, 1 << 16));
  o += fmt("  network from         %s%s\n", hw.network_source.c_str(),
           hw.comm_table.empty() ? "" : fmt(" (%zu measured rows)", hw.comm_table.size()).c_str());
  return o;
}

std::string report_to_text(const SizeReport& r) {
  const ParamCounts& c = r.params;
  const ModelConfig& m = r.cfg;
  std::string o = fmt("zaya size: %s (%s) on ", m.name.c_str(), r.config_path.c_str()) + profile_to_text(r.hw);
  o += "layout: " + layout_line(r.run, r.run.tokens_per_rank()) + "\n\n";
  o += fmt("Parameters (as `zaya params`)\n  %-44s %20s\n  %-44s %20s\n  %-44s %20s\n  %-44s %20s\n\n",
           "total, without embedding", with_commas(double(c.total)).c_str(), "active per token, without embedding",
           with_commas(double(c.active)).c_str(), "total with embedding",
           with_commas(double(c.total_with_embedding())).c_str(), "active with embedding",
           with_commas(double(c.active_with_embedding())).c_str());
  const FlopsPerToken& f = r.flops;
  o += fmt("FLOPs per token (matmuls; seq %d)\n", r.run.seq);
  o += fmt("  %-44s %14sFLOP\n", "forward", si(f.forward, 4).c_str());
  o += fmt("    %-42s %14sFLOP\n", "attention QK^T + PV (quadratic term)", si(f.attention_quadratic, 4).c_str());
  o += fmt("    %-42s %14sFLOP\n", "router", si(f.router, 4).c_str());
  o += fmt("    %-42s %14sFLOP\n", "experts", si(f.experts, 4).c_str());
  o += fmt("    %-42s %14sFLOP\n", "LM head", si(f.lm_head, 4).c_str());
  o += fmt("  %-44s %14sFLOP\n", "training step (forward + backward = 3x)", si(f.training, 4).c_str());
  o += fmt("  %-44s %14sFLOP\n", r.run.recompute ? "with recompute (hardware FLOPs)" : "recompute off: hardware = model",
           si(f.training_hardware, 4).c_str());
  o += fmt("  %-44s %14sFLOP\n\n", "6 x active with embedding (rule of thumb)", si(f.six_n_active, 4).c_str());
  const MemoryPerRank& mem = r.memory;
  o += fmt("Memory per rank (ZeRO-1 over %.0f ranks for dense, %.0f for experts)\n", mem.params.dense_zero_group,
           mem.params.expert_zero_group);
  auto mrow = [&](const char* k, double v) { o += fmt("  %-44s %14s\n", k, gb(v).c_str()); };
  mrow(fmt("weights (%d B/param, %s params held)", r.run.weight_bytes, si(mem.params.held()).c_str()).c_str(), mem.weights);
  mrow(fmt("master weights (%d B/param, sharded)", r.run.master_bytes).c_str(), mem.master_weights);
  mrow(fmt("gradients (%d B/param)", r.run.grad_bytes).c_str(), mem.gradients);
  mrow(fmt("optimizer state (%d B/param, sharded)", r.run.optim_bytes).c_str(), mem.optimizer);
  mrow("activations (one micro-batch)", mem.activations);
  mrow("communication buffers", mem.comm_buffers);
  o += fmt("  %-44s %14s%s\n\n", "total", gb(mem.total()).c_str(),
           r.hw.memory_GB > 0 ? fmt(" of %.4g GB (%s)", r.hw.memory_GB,
                                    mem.total() <= r.hw.memory_GB * 1e9 ? "fits" : "DOES NOT FIT")
                                    .c_str()
                              : "");
  const KvCache& kv = r.kv;
  o += fmt("KV cache per token per attention layer (bf16)\n");
  o += fmt("  CCA (Hk=%d x hd=%d, K and V)   %6.0f values  %8.0f B\n", m.num_kv_heads, m.head_dim, kv.cca,
           kv.cca * kv.bytes_per_value);
  o += fmt("  MHA (%d heads)                 %6.0f values  %8.0f B   (%.3gx CCA; CCA is 1/%.3g of it)\n",
           m.num_attention_heads, kv.mha, kv.mha * kv.bytes_per_value, kv.mha / kv.cca, kv.mha / kv.cca);
  o += fmt("  GQA (%d q heads, %d KV heads)    %6.0f values  %8.0f B   (same cache as CCA)\n", m.num_attention_heads,
           m.num_kv_heads, kv.gqa, kv.gqa * kv.bytes_per_value);
  o += fmt("  MQA (1 KV head)               %6.0f values  %8.0f B\n", kv.mqa, kv.mqa * kv.bytes_per_value);
  o += fmt("  all %d layers: CCA %s/token vs MHA %s/token; at %d context: %s vs %s per sequence "
           "(+ CCA conv state %.0f values per layer)\n\n",
           kv.layers, si(kv.cca_bytes_per_token()).c_str(), si(kv.mha_bytes_per_token()).c_str(), r.context,
           gb(kv.cca_bytes_per_token() * r.context).c_str(), gb(kv.mha_bytes_per_token() * r.context).c_str(),
           kv.conv_state_values);
  const StepPrediction& p = r.step;
  o += fmt("Predicted GEMMs per micro-batch (%s)\n", r.hw.measured_gemms() ? "measured GEMM table" : "tile/wave model");
  o += fmt("  %-17s %26s %6s %6s %10s %6s %9s %9s\n", "GEMM", "M x N x K", "batch", "eff%", "tile", "waves", "fwd ms",
           "bwd ms");
  for (auto& g : p.gemms) {
    const GemmTiming& t = g.forward_timing;
    std::string tile = t.from_table ? "table" : fmt("%dx%d", t.tile.m, t.tile.n);
    o += fmt("  %-17s %26s %6.0f %6.1f %10s %6.0f %9s %9s%s\n", g.name.c_str(),
             fmt("%.0f x %.0f x %.0f", g.forward.M, g.forward.N, g.forward.K).c_str(), g.forward.batch,
             100 * t.efficiency, tile.c_str(), t.waves, ms(g.forward_s).c_str(), ms(g.backward_s).c_str(),
             t.memory_bound ? "  (memory-bound)" : "");
  }
  o += fmt("\nPredicted step (ms)\n");
  auto srow = [&](const char* k, double v) { o += fmt("  %-44s %12s\n", k, ms(v).c_str()); };
  srow("GEMMs forward (per micro-batch)", p.gemm_forward_s);
  srow("GEMMs backward", p.gemm_backward_s);
  if (r.run.recompute) srow("GEMMs recompute", p.gemm_recompute_s);
  srow("elementwise ops (bytes / bandwidth, exp/erf)", p.memops_s);
  srow("kernel overheads", p.kernel_overhead_s);
  if (r.run.ep > 1) srow("EP all-to-all", p.ep_comm_s);
  if (r.run.cp > 1) srow("CP K/V all-gather + reduce-scatter", p.cp_comm_s);
  srow(fmt("micro-batch total (x %d)", r.run.grad_accum).c_str(), p.micro_batch_s);
  srow("optimizer update", p.optimizer_s);
  srow("ZeRO-1 reduce-scatter + all-gather", p.zero_comm_s);
  srow("  of which exposed", p.zero_comm_exposed_s);
  srow("step", p.step_s);
  if (p.by_zones) o += "  (the step is the sum of the zones below: measured kernel table)\n";
  o += fmt("\nBy profiler zone (ms per step; term, source)\n");
  for (const ZoneCost& z : p.zones)
    o += fmt("  %-44s %12s  %s, %s\n", z.path.c_str(), ms(z.seconds).c_str(), zone_term_name(z.term), z.source.c_str());
  o += fmt("  %-44s %12s\n  %-44s %11.1f%%\n", "tokens/s per device", with_commas(p.tokens_per_s_per_device).c_str(),
           "MFU (model FLOPs / peak)", 100 * p.mfu);
  if (r.run.recompute) o += fmt("  %-44s %11.1f%%\n", "HFU (with recompute)", 100 * p.hfu);
  o += fmt("\nAt %d devices (dp=%d, same micro-batch and grad-accum): step %s ms (ZeRO-1 comm %s ms, %s ms exposed), "
           "%s tokens/s per device, MFU %.1f%%\n",
           r.devices, r.devices / r.run.cp, ms(r.at_scale.step_s).c_str(), ms(r.at_scale.zero_comm_s).c_str(),
           ms(r.at_scale.zero_comm_exposed_s).c_str(), with_commas(r.at_scale.tokens_per_s_per_device).c_str(),
           100 * r.at_scale.mfu);
  o += fmt("  memory per rank %s%s\n", gb(r.at_scale_memory.total()).c_str(),
           r.hw.memory_GB > 0 ? (r.at_scale_memory.total() <= r.hw.memory_GB * 1e9 ? " (fits)" : " (DOES NOT FIT)") : "");
  o += fmt("  days to train %s tokens: %.1f\n\n", si(r.token_budget).c_str(), r.days);
  o += fmt("Decode (bf16 weights and KV cache, context %d, roofline per sub-layer)\n", r.context);
  o += fmt("  %6s %12s %14s %14s %14s %12s\n", "batch", "ms/step", "tokens/s", "weights read", "KV read", "experts/layer");
  for (auto& d : r.decode)
    o += fmt("  %6d %12s %14s %14s %14s %12.2f\n", d.batch, ms(d.seconds).c_str(), with_commas(d.tokens_per_s()).c_str(),
             gb(d.dense_weight_bytes + d.expert_weight_bytes).c_str(), gb(d.kv_bytes).c_str(), d.experts_touched);
  return o;
}

std::string rules_to_text(const ModelConfig& cfg, const HardwareProfile& hw, const std::vector<RuleCheck>& rules) {
  std::string o = fmt("zaya size --check: %s on %s\n", cfg.name.c_str(), hw.name.c_str());
  int warns = 0;
  for (auto& r : rules) {
    o += fmt("  [%s] %s\n         %s\n", r.pass ? "pass" : "WARN", r.rule.c_str(), r.detail.c_str());
    if (!r.pass) {
      o += fmt("         fix: %s\n", r.fix.c_str());
      ++warns;
    }
  }
  o += fmt("%zu rules: %zu pass, %d warn\n", rules.size(), rules.size() - warns, warns);
  return o;
}

std::string search_to_text(const SearchResult& s, const SearchTargets& t, const HardwareProfile& hw, size_t top) {
  std::string o = fmt("zaya size --search: total %s, active %s (without embedding, +/-%.0f%%) on %s\n",
                      si(t.total).c_str(), si(t.active).c_str(), 100 * t.tolerance, hw.name.c_str());
  o += fmt("%ld shapes enumerated, %zu within the window, %d on the Pareto front (training tokens/s up, decode "
           "latency at batch %d, context %d, down)\n",
           s.enumerated, s.candidates.size(), s.pareto_count, t.decode_batch, t.context);
  auto head = [&] {
    o += fmt("  %4s %-36s %9s %9s %12s %6s %10s %5s %s\n", "rank", "shape", "total", "active", "train tok/s", "MFU%",
             "decode ms", "fits", "");
  };
  auto line = [&](const Candidate& c) {
    o += fmt("  %4d %-36s %9s %9s %12s %6.1f %10.3f %5s %s%s\n", c.rank_train, c.cfg.name.c_str(),
             si(double(c.params.total)).c_str(), si(double(c.params.active)).c_str(),
             with_commas(c.tokens_per_s).c_str(), 100 * c.mfu, c.decode_s * 1e3, c.fits ? "yes" : "no",
             c.pareto ? "pareto" : "", c.reference ? " <- reference" : "");
  };
  o += fmt("\nTop %zu by training throughput\n", std::min(top, s.candidates.size()));
  head();
  for (size_t i = 0; i < s.candidates.size() && i < top; ++i) line(s.candidates[i]);
  o += "\nPareto front\n";
  head();
  for (auto& c : s.candidates)
    if (c.pareto) line(c);
  const Candidate& r = s.reference;
  o += fmt("\nReference %s: total %s, active %s%s\n", r.cfg.name.c_str(), with_commas(double(r.params.total)).c_str(),
           with_commas(double(r.params.active)).c_str(), r.in_window ? "" : " (outside the window; placed anyway)");
  o += fmt("  training %s tokens/s per device (MFU %.1f%%): rank %d of %zu; decode %.3f ms: rank %d of %zu; %s\n",
           with_commas(r.tokens_per_s).c_str(), 100 * r.mfu, r.rank_train, s.candidates.size(), r.decode_s * 1e3,
           r.rank_decode, s.candidates.size(),
           r.pareto ? "on the Pareto front" : fmt("dominated by %d shapes", r.dominated_by).c_str());
  return o;
}

std::string moe_widths_to_text(const ModelConfig& cfg, const HardwareProfile& hw, const MoeWidthTable& t) {
  std::string o = fmt("zaya size --moe-widths: %s on %s, expert parameters per MoE layer fixed at %s (E x F = %ld)\n",
                      cfg.name.c_str(), hw.name.c_str(), si(t.expert_params_per_layer).c_str(),
                      long(cfg.num_experts) * cfg.ffn_hidden_size);
  double ref_active = 0;
  for (auto& r : t.rows)
    if (r.reference) ref_active = r.active_params;
  o += fmt("  %4s %6s %4s %9s %6s %9s %8s %10s %12s %6s", "E", "width", "k", "active", "x cfg", "tok/exp", "fc1 eff",
           "expert ms", "train tok/s", "MFU%");
  for (int b : t.batches) o += fmt(" %11s", fmt("dec b=%d ms", b).c_str());
  o += "\n";
  for (auto& r : t.rows) {
    o += fmt("  %4d %6d %4d %9s %6.2f %9.1f %7.1f%% %10s %12s %6.1f", r.experts, r.ffn / 2, r.topk,
             si(r.active_params).c_str(), ref_active > 0 ? r.active_params / ref_active : 0.0, r.tokens_per_expert,
             100 * r.expert_efficiency, ms(r.expert_gemm_s).c_str(), with_commas(r.tokens_per_s).c_str(), 100 * r.mfu);
    for (auto& d : r.decode) o += fmt(" %11.3f", d.seconds * 1e3);
    o += r.reference ? "  <- config\n" : "\n";
  }
  o += fmt("(x cfg: active parameters relative to the config's; training: the whole step at the layout given, expert "
           "GEMMs at the tokens each expert receives; decode: context %d, bf16, bytes of the experts a batch touches)\n",
           t.context);
  return o;
}

}  // namespace zaya::size
