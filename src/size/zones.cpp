#include "size/zones.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/params.h"
#include "size/gemm_model.h"
#include "size/memory.h"

namespace zaya::size {
using json = nlohmann::json;

const char* zone_term_name(ZoneTerm t) {
  switch (t) {
    case ZoneTerm::Gemm: return "gemm";
    case ZoneTerm::Attention: return "attention";
    case ZoneTerm::Conv: return "conv";
    case ZoneTerm::Bytes: return "bytes";
    case ZoneTerm::Optimizer: return "optimizer";
  }
  return "?";
}

const std::vector<ZoneSpec>& zone_table() {
  using T = ZoneTerm;
  static const std::vector<ZoneSpec> t = {
      {"forward/bf16_weights", T::Bytes, true},
      {"forward/embedding", T::Bytes},
      {"forward/cca/res_merge+norm", T::Bytes},
      {"forward/cca/projections", T::Gemm},
      {"forward/cca/conv+qk_mean", T::Conv},
      {"forward/cca/l2norm+rope", T::Bytes},
      {"forward/cca/attention", T::Attention},
      {"forward/moe/res_merge+norm", T::Bytes},
      {"forward/moe/router", T::Gemm},
      {"forward/moe/dispatch+combine", T::Bytes},
      {"forward/moe/experts", T::Gemm},
      {"forward/lm_head+loss/lm_head", T::Gemm},
      {"forward/lm_head+loss/cross_entropy", T::Bytes},
      {"backward/zero_grads", T::Bytes},
      {"backward/lm_head+loss/cross_entropy", T::Bytes},
      {"backward/lm_head+loss/lm_head", T::Gemm},
      {"backward/moe/dispatch+combine", T::Bytes},
      {"backward/moe/experts", T::Gemm},
      {"backward/moe/router", T::Gemm},
      {"backward/moe/res_merge+norm", T::Bytes},
      {"backward/cca/projections", T::Gemm},
      {"backward/cca/attention", T::Attention},
      {"backward/cca/l2norm+rope", T::Bytes},
      {"backward/cca/conv+qk_mean", T::Conv},
      {"backward/cca/res_merge+norm", T::Bytes},
      {"backward/embedding", T::Bytes},
      {"optimizer", T::Optimizer},
  };
  return t;
}

double kernel_seconds(const HardwareProfile& hw, const std::string& dtype, const std::string& kind,
                      const std::vector<double>& dims, KernelFlops flops, std::string* source) {
  const MeasuredKernel* best = nullptr;
  double best_d = INFINITY;
  for (const MeasuredKernel& k : hw.kernel_table) {
    if (k.kind != kind || k.dtype != dtype || k.dims.size() != dims.size()) continue;
    double d = 0;
    for (size_t i = 0; i < dims.size(); ++i) d += std::pow(std::log(std::max(dims[i], 1.0) / k.dims[i]), 2);
    if (d < best_d) best_d = d, best = &k;
  }
  if (!best) return -1;
  if (best_d == 0) {
    if (source) *source = "measured";
    return best->time_us * 1e-6;
  }
  // The nearest shape's rate, applied to this shape's FLOPs.
  if (source) *source = "scaled";
  return best->time_us * 1e-6 * flops(dims) / flops(best->dims);
}

double gemm_kernel_flops(const std::vector<double>& d) { return 2 * d[0] * d[1] * d[2]; }
double attention_kernel_flops(const std::vector<double>& d) { return 2 * d[0] * d[2] * d[1] * d[1] * d[4]; }
double conv_kernel_flops(const std::vector<double>& d) { return 2 * d[0] * d[1] * d[2] * (d[4] + d[3] * d[5]); }

double gemm_term(const HardwareProfile& hw, const std::string& dtype, const std::string& layout, double M, double N,
                 double K, std::string* source) {
  M = std::ceil(M), N = std::ceil(N), K = std::ceil(K);
  if (M < 1 || N < 1 || K < 1) return 0;
  const double s = kernel_seconds(hw, dtype, "gemm_" + layout, {M, N, K}, gemm_kernel_flops, source);
  if (s >= 0) return s;
  if (source) *source = "model";
  return gemm_time(hw, dtype, {M, N, K, 1}).seconds;
}

double attention_term(const HardwareProfile& hw, const std::string& dtype, double B, double T, double Hq, double Hk,
                      double hd, bool backward, std::string* source) {
  const double s = kernel_seconds(hw, dtype, backward ? "attention_bwd" : "attention_fwd", {B, T, Hq, Hk, hd},
                                  attention_kernel_flops, source);
  if (s >= 0) return s;
  // Flash attention on the GEMM model: QK^T and PV over the causal half, traffic Q, K, V, O;
  // backward: dgrad and wgrad of both (2x) and QK^T again (0.5x).
  if (source) *source = "model";
  const double a = dtype_bytes(dtype), io = (2 * B * Hq * T * hd + 2 * B * Hk * T * hd) * a / 2;
  const double fwd = gemm_time(hw, dtype, {T, T, hd, B * Hq, io}, 0.5).seconds +
                     gemm_time(hw, dtype, {T, hd, T, B * Hq, io}, 0.5).seconds;
  return backward ? 2.5 * fwd : fwd;
}

double conv_term(const HardwareProfile& hw, const std::string& dtype, const std::vector<double>& d, bool backward,
                 std::string* source) {
  if (d.size() != 6) fail("conv_term: expected B, T, C, hd, K0, K1");
  const double s = kernel_seconds(hw, dtype, backward ? "conv_bwd" : "conv_fwd", d, conv_kernel_flops, source);
  if (s >= 0) return s;
  // The grouped stage as C/hd * K1 batched [N, hd] x [hd, hd] products, the depthwise stage
  // as bytes (p read, y0 written); backward 2x.
  if (source) *source = "model";
  const double N = d[0] * d[1], a = dtype_bytes(dtype);
  const double fwd = gemm_time(hw, dtype, {N, d[3], d[3], d[2] / d[3] * d[5]}).seconds +
                     bytes_term(hw, N * 2 * d[2] * a, {}, 1);
  return backward ? 2 * fwd : fwd;
}

double bytes_term(const HardwareProfile& hw, double bytes, const SpecialCounts& special, double launches) {
  const double bw = hw.elementwise.kernels_GBps > 0 ? hw.elementwise.kernels_GBps * 1e9 : hw.achievable_bandwidth();
  return std::max(bytes / bw, special_seconds(special, hw.elementwise)) + launches * hw.kernel_overhead_us * 1e-6;
}

double cross_entropy_term(const HardwareProfile& hw, const std::string& dtype, double N, double V, bool backward) {
  const double NV = N * V;
  const SpecialCounts exps{NV, 0};
  // kernels/loss.cpp, one row per thread at a time (a row of V floats stays in cache).
  if (dtype == "bf16" && hw.kind == "cpu") {
    // The LM head writes fp32 blocks that this zone rounds into the bf16 logits (read 4, write
    // 2 a logit); the loss widens each bf16 row (read 2), then its max and sum of exps run in
    // cache. Backward: a bf16 row read, exp, written back over the logits.
    if (!backward) return bytes_term(hw, NV * 8, {}, 2) + special_seconds(exps, hw.elementwise);
    return std::max(bytes_term(hw, NV * 4, {}, 1), special_seconds(exps, hw.elementwise));
  }
  // fp32: the max pass streams the row from memory, the sum of exps runs over it in cache.
  // Backward: one pass reads the logits and writes the gradient over them, an exp a logit.
  if (!backward) return bytes_term(hw, NV * 4, {}, 1) + special_seconds(exps, hw.elementwise);
  return std::max(bytes_term(hw, NV * 8, {}, 1), special_seconds(exps, hw.elementwise));
}

namespace {

// The products of one zone: layout, M, N, K, count (experts, or 1), and the set of products it
// runs beside (0: alone, split over the threads): gemm_side_by_side runs a set's products one
// per thread at once (an input gradient beside its weight gradient; every expert's product).
struct Product {
  const char* layout;
  double M, N, K, count = 1;
  int set = 0;
};

// A forward product [M, K] x [K, N] (weights [N, K]) and its backward pair: dgrad [M, N] x
// [N, K] (nn) and wgrad [N, M] x [M, K] (tn). fwd_set / bwd_set: the side-by-side sets, -1
// for a fresh one (the pair run beside each other), 0 for none.
struct Zones {
  std::vector<Product> fwd, bwd;
  int sets = 0;
  void with_backward(double M, double N, double K, double count = 1, int fwd_set = 0, int bwd_set = 0) {
    if (fwd_set < 0) fwd_set = ++sets;
    if (bwd_set < 0) bwd_set = ++sets;
    fwd.push_back({"nt", M, N, K, count, fwd_set});
    bwd.push_back({"nn", M, K, N, count, bwd_set});
    bwd.push_back({"tn", N, K, M, count, bwd_set});
  }
};

// The products of each GEMM zone, per sub-layer (the LM head: once). Model::backward's CCA and
// router run each product's gradient pair side by side (gemm_grads_side_by_side); the experts
// run whole experts, or equal runs of rows, one per thread (LocalExperts, run_experts).
Zones projections(const ModelConfig& c, double N) {
  const double D = c.hidden_size, QD = c.num_q_heads * c.head_dim, KD = c.num_kv_heads * c.head_dim;
  Zones z;
  z.with_backward(N, QD + KD, D, 1, 0, -1);  // [linear_q; linear_k]
  z.with_backward(N, KD, D, 1, 0, -1);       // [val_proj1; val_proj2]
  z.with_backward(N, D, QD, 1, 0, -1);       // o_proj
  return z;
}
Zones router(const ModelConfig& c, double N) {
  const double D = c.hidden_size, R = c.router_hidden;
  Zones z;
  z.with_backward(N, R, D, 1, 0, -1);
  z.with_backward(N, R, R, 1, 0, -1);
  z.with_backward(N, R, R, 1, 0, -1);
  z.with_backward(N, c.num_classes(), R, 1, 0, -1);
  return z;
}
Zones experts(const ModelConfig& c, double per_expert, double local) {
  const double D = c.hidden_size, F = c.ffn_hidden_size;
  Zones z;
  if (per_expert < 1) return z;
  z.with_backward(std::ceil(per_expert), F, D, local, 1, 2);
  z.with_backward(std::ceil(per_expert), D, F / 2, local, 1, 2);
  return z;
}
Zones lm_head(const ModelConfig& c, double N) {
  Zones z;
  z.with_backward(N, c.vocab_size, c.hidden_size);
  return z;
}

void merge_source(std::string& source, const std::string& src) {
  if (source.empty() || src == "model" || (src == "scaled" && source == "measured")) source = src;
}

// A set's products run one per thread: on P threads the set takes its products' one-thread
// times over P, or its longest product (a pair on more than two threads). Without one-thread
// rows in the table (a GPU profile, one thread), the products are priced one after another.
double products_seconds(const HardwareProfile& hw, const std::string& dt, const std::vector<Product>& ps,
                        std::string& source) {
  const int P = std::max(hw.elementwise.threads, 1);
  double s = 0;
  std::map<int, std::pair<double, double>> sets;  // set -> (sum, longest) of one-thread times
  for (const Product& p : ps) {
    std::string src;
    if (p.set > 0 && P > 1) {
      const double one = kernel_seconds(hw, dt, std::string("gemm1_") + p.layout,
                                        {std::ceil(p.M), std::ceil(p.N), std::ceil(p.K)}, gemm_kernel_flops, &src);
      if (one >= 0) {
        auto& [sum, longest] = sets[p.set];
        sum += p.count * one;
        longest = std::max(longest, one);
        merge_source(source, src);
        continue;
      }
    }
    s += p.count * gemm_term(hw, dt, p.layout, p.M, p.N, p.K, &src);
    merge_source(source, src);
  }
  for (const auto& [set, t] : sets) s += std::max(t.first / P, t.second);
  return s;
}

const MemOp* find_memop(const Workload& w, const std::string& name) {
  for (const MemOp& m : w.memops)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

std::vector<ZoneCost> predict_zones(const Workload& w, const HardwareProfile& hw) {
  const ModelConfig& c = w.cfg;
  const RunLayout& run = w.run;
  const std::string& dt = run.dtype;
  const double N = w.tokens, L = c.num_layers, b = run.micro_batch, T = run.seq / run.cp;
  const double passes_fwd = run.recompute ? 2 : 1;
  // zaya's CPU trainer keeps activations in fp32 whatever the products' precision: its
  // elementwise ops move the bytes of the fp32 workload's (scaling the bf16 workload's bytes
  // by 4 / 2 also doubled the residual's, already fp32).
  RunLayout fp32_run = run;
  fp32_run.dtype = "fp32";
  const Workload w_fp32 = hw.kind == "cpu" && run.act_bytes() != 4 ? build_workload(c, fp32_run) : Workload{};
  const Workload& w_mem = hw.kind == "cpu" && run.act_bytes() != 4 ? w_fp32 : w;
  // An elementwise op's forward and backward seconds per instance (a share of its bytes).
  auto mem = [&](const char* name, double share, bool backward) {
    const MemOp* m = find_memop(w_mem, name);
    if (!m) fail("step model: no elementwise op '", name, "' in the workload");
    const double bytes = m->bytes * share * (backward ? 2 : 1);
    return bytes_term(hw, bytes, backward ? m->special_bwd : m->special_fwd, m->kernels * share);
  };
  const std::vector<double> conv_dims{b, T, double(c.conv_channels()), double(c.head_dim),
                                      double(c.conv_kernel0), double(c.conv_kernel1)};
  const Zones proj = projections(c, N), rout = router(c, N), head = lm_head(c, N);
  const Zones exp = experts(c, w.tokens_per_expert, c.num_experts / run.ep);
  RankParams rp = rank_params(c, run);
  std::vector<ZoneCost> out;
  for (const ZoneSpec& z : zone_table()) {
    ZoneCost zc{z.path, z.term, 0, "model"};
    const bool bwd = z.path.rfind("backward/", 0) == 0;
    const std::string leaf = z.path.substr(z.path.rfind('/') + 1);
    std::string src;
    double s = 0;  // per micro-batch, forward counted once (recompute below)
    if (leaf == "projections") {
      s = L * (products_seconds(hw, dt, bwd ? proj.bwd : proj.fwd, src) + mem("attn.value_shift", 1, bwd));
    } else if (leaf == "router") {
      s = L * (products_seconds(hw, dt, bwd ? rout.bwd : rout.fwd, src) + mem("router.norm+gelu+softmax+topk", 1, bwd));
    } else if (leaf == "experts") {
      s = L * (products_seconds(hw, dt, bwd ? exp.bwd : exp.fwd, src) + mem("experts.swiglu", 1, bwd));
    } else if (leaf == "lm_head") {
      s = products_seconds(hw, dt, bwd ? head.bwd : head.fwd, src);
    } else if (leaf == "attention") {
      s = L * attention_term(hw, dt, b, T, c.num_q_heads, c.num_kv_heads, c.head_dim, bwd, &src);
    } else if (leaf == "conv+qk_mean") {
      // The q-k mean reads the conv output and p, writes the pre-norm q, k: 3 C values a token.
      s = L * (conv_term(hw, dt, conv_dims, bwd, &src) +
               bytes_term(hw, N * 3.0 * c.conv_channels() * 4 * (bwd ? 2 : 1), {}, 1));
    } else if (leaf == "l2norm+rope") {
      s = L * mem("attn.qk_mean+l2norm+rope", 1, bwd);
    } else if (leaf == "res_merge+norm") {
      s = L * mem("residual_merge+norm", 1, bwd);  // one merge + norm per sub-layer
    } else if (leaf == "dispatch+combine") {
      s = L * mem("moe.dispatch+combine", 1, bwd);
    } else if (leaf == "cross_entropy") {
      s = cross_entropy_term(hw, dt, N, c.vocab_size, bwd);
    } else if (leaf == "embedding") {
      s = mem("embedding+final_merge+norm", 1, bwd);
    } else if (leaf == "zero_grads") {
      // Model::backward zeroes every gradient but the tied embedding's and the experts' (their
      // products write them with beta 0).
      const double experts = rp.experts, embed = double(c.vocab_size) * c.hidden_size;
      s = bytes_term(hw, std::max(rp.held() - experts - embed, 0.0) * run.grad_bytes, {}, 1);
    } else if (z.bf16_first_step) {
      s = 0;
    } else if (leaf == "optimizer") {
      zc.seconds = -1;  // filled by the caller (predict_step's optimizer term)
      out.push_back(zc);
      continue;
    } else {
      fail("step model: zone '", z.path, "' has no cost term");
    }
    if (!src.empty()) zc.source = src;
    const double micro = bwd ? s : s * passes_fwd;
    zc.seconds = micro * run.grad_accum;
    out.push_back(zc);
  }
  return out;
}

std::vector<std::string> zone_kernel_shapes(const Workload& w) {
  const ModelConfig& c = w.cfg;
  const RunLayout& run = w.run;
  const double N = w.tokens;
  std::vector<std::string> out;
  auto add = [&](std::string line) {
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(std::move(line));
  };
  auto num = [](double v) { return std::to_string(int64_t(std::ceil(v))); };
  for (const Zones& z : {projections(c, N), router(c, N), experts(c, w.tokens_per_expert, 1), lm_head(c, N)})
    for (const auto* list : {&z.fwd, &z.bwd})
      for (const Product& p : *list) {
        const std::string dims = std::string(p.layout) + " " + num(p.M) + " " + num(p.N) + " " + num(p.K);
        add("gemm " + dims);  // also the fallback of a set on one thread
        if (p.set > 0) add("gemm1 " + dims);
      }
  const int T = run.seq / run.cp;
  add("attention " + num(run.micro_batch) + " " + num(T) + " " + num(c.num_q_heads) + " " + num(c.num_kv_heads) +
      " " + num(c.head_dim));
  add("conv " + num(run.micro_batch) + " " + num(T) + " " + num(c.conv_channels()) + " " + num(c.head_dim) + " " +
      num(c.conv_kernel0) + " " + num(c.conv_kernel1));
  return out;
}

json zones_to_json(const std::vector<ZoneCost>& z) {
  json a = json::array();
  for (const ZoneCost& c : z)
    a.push_back({{"zone", c.path}, {"term", zone_term_name(c.term)}, {"seconds", c.seconds}, {"source", c.source}});
  return a;
}

}  // namespace zaya::size
