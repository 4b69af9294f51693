#include "model/params.h"
#include "model/split_master.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

size_t ParamTable::add(const std::string& name, std::vector<int64_t> shape, ParamRole role, int sublayer,
                       int expert) {
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.numel = 1;
  for (auto d : p.shape) p.numel *= size_t(d);
  p.offset = total;
  p.role = role;
  p.sublayer = sublayer;
  p.expert = expert;
  total += p.numel;
  index[name] = params.size();
  params.push_back(std::move(p));
  return params.back().offset;
}

const ParamInfo* ParamTable::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &params[it->second];
}

static ResScaleOffsets add_res_scale(ParamTable& t, const std::string& pre, int D, bool with_residual, int sub) {
  ResScaleOffsets r;
  r.hs_scale = t.add(pre + "res_scale.hidden_states_scale", {D}, ParamRole::Scale, sub);
  r.hs_bias = t.add(pre + "res_scale.hidden_states_bias", {D}, ParamRole::Bias, sub);
  if (with_residual) {
    r.res_scale = t.add(pre + "res_scale.residual_scale", {D}, ParamRole::Scale, sub);
    r.res_bias = t.add(pre + "res_scale.residual_bias", {D}, ParamRole::Bias, sub);
  }
  return r;
}

ModelLayout build_layout(const ModelConfig& cfg, ExpertRange experts) {
  cfg.validate();
  if (experts.end < 0) experts.end = cfg.num_experts;
  ZAYA_CHECK(experts.begin >= 0 && experts.begin < experts.end && experts.end <= cfg.num_experts,
             "expert range [", experts.begin, ", ", experts.end, ") is not within the ", cfg.num_experts, " experts");
  ModelLayout L;
  L.cfg = cfg;
  L.experts = experts;
  auto& t = L.params;
  const int D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;
  const int C = cfg.conv_channels(), R = cfg.router_hidden, F = cfg.ffn_hidden_size, NC = cfg.num_classes();
  L.embed = t.add("model.embed_tokens.weight", {cfg.vocab_size, D}, ParamRole::Embedding, -1);
  int moe_index = 0;
  for (int n = 0; n < cfg.num_sublayers(); ++n) {
    std::string pre = cat("model.layers.", n, ".");
    SublayerOffsets s;
    s.attention = n % 2 == 0;
    s.rs = cfg.scale_residual_merge ? add_res_scale(t, pre, D, n != 0, n) : ResScaleOffsets{};
    s.norm = t.add(pre + "input_norm.weight", {D}, ParamRole::Norm, n);
    if (s.attention) {
      std::string a = pre + "self_attn.qkv.";
      auto& c = s.cca;
      c.wq = t.add(a + "linear_q.weight", {Hq * hd, D}, ParamRole::Matrix, n);
      c.wk = t.add(a + "linear_k.weight", {Hk * hd, D}, ParamRole::Matrix, n);
      c.wv1 = t.add(a + "val_proj1.weight", {Hk * hd / 2, D}, ParamRole::Matrix, n);
      c.wv2 = t.add(a + "val_proj2.weight", {Hk * hd / 2, D}, ParamRole::Matrix, n);
      c.conv0_w = t.add(a + "conv_qk.0.weight", {C, 1, cfg.conv_kernel0}, ParamRole::Conv, n);
      c.conv0_b = t.add(a + "conv_qk.0.bias", {C}, ParamRole::Bias, n);
      c.conv1_w = t.add(a + "conv_qk.1.weight", {C, hd, cfg.conv_kernel1}, ParamRole::Conv, n);
      c.conv1_b = t.add(a + "conv_qk.1.bias", {C}, ParamRole::Bias, n);
      c.temp = t.add(a + "temp", {Hk}, ParamRole::Scale, n);
      c.wo = t.add(pre + "self_attn.o_proj.weight", {D, Hq * hd}, ParamRole::Matrix, n);
    } else {
      std::string r = pre + "zaya_block.router.";
      auto& ro = s.moe.router;
      ro.down_w = t.add(r + "down_proj.weight", {R, D}, ParamRole::Matrix, n);
      ro.down_b = t.add(r + "down_proj.bias", {R}, ParamRole::Bias, n);
      if (cfg.use_eda && moe_index > 0) ro.eda_scale = t.add(r + "router_states_scale", {R}, ParamRole::Scale, n);
      ro.norm_w = t.add(r + "rmsnorm_eda.weight", {R}, ParamRole::Norm, n);
      ro.mlp0_w = t.add(r + "router_mlp.0.weight", {R, R}, ParamRole::Matrix, n);
      ro.mlp0_b = t.add(r + "router_mlp.0.bias", {R}, ParamRole::Bias, n);
      ro.mlp2_w = t.add(r + "router_mlp.2.weight", {R, R}, ParamRole::Matrix, n);
      ro.mlp2_b = t.add(r + "router_mlp.2.bias", {R}, ParamRole::Bias, n);
      ro.mlp4_w = t.add(r + "router_mlp.4.weight", {NC, R}, ParamRole::Matrix, n);
      ro.balancing_bias = L.buffers.add(r + "balancing_biases", {NC}, ParamRole::Bias, n);
      for (int e = experts.begin; e < experts.end; ++e) {
        std::string x = cat(pre, "zaya_block.experts.local_experts.", e, ".");
        s.moe.fc1.push_back(t.add(x + "linear_fc1.weight", {F, D}, ParamRole::ExpertMatrix, n, e));
        s.moe.fc2.push_back(t.add(x + "linear_fc2.weight", {D, F / 2}, ParamRole::ExpertMatrix, n, e));
      }
      ++moe_index;
    }
    L.sub.push_back(std::move(s));
  }
  if (cfg.scale_residual_merge) L.final_rs = add_res_scale(t, "model.", D, true, -1);
  L.final_norm = t.add("model.final_norm.weight", {D}, ParamRole::Norm, -1);
  return L;
}

static bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::char_traits<char>::length(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

template <class T>
void init_params(const ModelLayout& L, uint64_t seed, T* params) {
  const double std0 = L.cfg.init_std;
  // Output projections into the residual stream get the GPT-2 / Megatron scaled init.
  const double std_out = std0 / std::sqrt(2.0 * L.cfg.num_sublayers());
  for (const ParamInfo& p : L.params.params) {
    T* w = params + p.offset;
    uint64_t key = hash_name(p.name);
    auto fill_normal = [&](double sd) {
      for (size_t i = 0; i < p.numel; ++i) w[i] = T(sd * normal_at(seed, key, i));
    };
    auto fill_uniform = [&](double bound) {  // PyTorch's default conv init
      Philox r(seed, key);
      for (size_t i = 0; i < p.numel; ++i) w[i] = T((2 * r.uniform() - 1) * bound);
    };
    auto fill = [&](double v) { for (size_t i = 0; i < p.numel; ++i) w[i] = T(v); };
    switch (p.role) {
      case ParamRole::Embedding: fill_normal(std0); break;
      case ParamRole::Matrix:
        // The router MLP's layers preserve variance (std 1 / sqrt(fan in)): at std0 its three
        // stacked layers leave the tokens' router probabilities ~1e-4 apart, far below any
        // balancing-bias step, and every token takes the same class (docs/train.md, "Routing
        // health").
        if (p.name.find(".router.router_mlp.") != std::string::npos)
          fill_normal(1.0 / std::sqrt(double(p.shape[1])));
        else
          fill_normal(ends_with(p.name, "o_proj.weight") ? std_out : std0);
        break;
      case ParamRole::ExpertMatrix:
        fill_normal(ends_with(p.name, "linear_fc2.weight") ? std_out : std0);
        break;
      case ParamRole::Conv: fill_uniform(1.0 / std::sqrt(double(p.shape[1] * p.shape[2]))); break;
      case ParamRole::Norm: fill(1.0); break;
      case ParamRole::Scale: fill(1.0); break;  // residual scales, EDA scale, temp (1 from scratch)
      case ParamRole::Bias:
        if (ends_with(p.name, "conv_qk.0.bias") || ends_with(p.name, "conv_qk.1.bias")) {
          int64_t fan_in = ends_with(p.name, "0.bias") ? L.cfg.conv_kernel0 : int64_t(L.cfg.head_dim) * L.cfg.conv_kernel1;
          Philox r(seed, key);
          double bound = 1.0 / std::sqrt(double(fan_in));
          for (size_t i = 0; i < p.numel; ++i) w[i] = T((2 * r.uniform() - 1) * bound);
        } else {
          fill(0.0);
        }
        break;
    }
  }
}

template <class T>
void init_buffers(const ModelLayout& L, T* buffers) {
  for (const ParamInfo& p : L.buffers.params)
    for (size_t i = 0; i < p.numel; ++i)
      buffers[p.offset + i] = T(L.cfg.use_mod && i + 1 == p.numel ? -1.0 : 0.0);  // skip class starts at -1
}

template <class T>
void randomize_for_checks(const ModelLayout& L, uint64_t seed, T* params, T* buffers) {
  init_params(L, seed, params);
  init_buffers(L, buffers);
  Philox r(seed, 99);
  for (const ParamInfo& p : L.params.params)
    if (p.role != ParamRole::Matrix && p.role != ParamRole::ExpertMatrix && p.role != ParamRole::Embedding)
      for (size_t i = 0; i < p.numel; ++i) params[p.offset + i] += T(0.3 * r.normal());
  for (const ParamInfo& p : L.buffers.params) {
    for (size_t i = 0; i < p.numel; ++i) buffers[p.offset + i] += T(0.05 * r.normal());
    if (L.cfg.use_mod) buffers[p.offset + p.numel - 1] = T(0.2 + 0.1 * r.normal());
  }
}

template void randomize_for_checks<float>(const ModelLayout&, uint64_t, float*, float*);
template void randomize_for_checks<double>(const ModelLayout&, uint64_t, double*, double*);
template void init_params<float>(const ModelLayout&, uint64_t, float*);
template void init_params<double>(const ModelLayout&, uint64_t, double*);
template void init_buffers<float>(const ModelLayout&, float*);
template void init_buffers<double>(const ModelLayout&, double*);

ParamCounts count_params(const ModelConfig& cfg) {
  cfg.validate();
  const int64_t D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_q_heads, Hk = cfg.num_kv_heads;
  const int64_t C = cfg.conv_channels(), R = cfg.router_hidden, F = cfg.ffn_hidden_size, NC = cfg.num_classes();
  const int64_t L = cfg.num_layers, E = cfg.num_experts;
  ParamCounts c;
  c.cca_core = Hq * hd * D + Hk * hd * D + Hk * hd * D /* v1 + v2 */ + C * cfg.conv_kernel0 + C +
               C * hd * cfg.conv_kernel1 + C + Hk + D * Hq * hd;
  c.expert = F * D + D * (F / 2);
  c.router_first = R * D + R + R /* norm */ + 2 * (R * R + R) + NC * R;
  c.router = c.router_first + (cfg.use_eda ? R : 0);
  const int64_t rs_first = cfg.scale_residual_merge ? 2 * D : 0, rs = cfg.scale_residual_merge ? 4 * D : 0;
  c.attention_total = L * (c.cca_core + D) + rs_first + (L - 1) * rs;
  c.moe_total = L * (E * c.expert + D + rs) + c.router_first + (L - 1) * c.router;
  c.final_ = rs + D;
  c.embedding = int64_t(cfg.vocab_size) * D;
  c.total = c.attention_total + c.moe_total + c.final_;
  c.active = c.total - L * (E - std::min<int64_t>(cfg.topk, E)) * c.expert;
  return c;
}

std::vector<FlatRange> shard_ranges(const ParamTable& table, int world, bool muon_whole) {
  ZAYA_CHECK(world >= 1, "shard_ranges: world ", world, " must be >= 1");
  std::vector<FlatRange> out(static_cast<size_t>(world));
  size_t begin = 0;
  for (int r = 0; r < world; ++r) {
    size_t target = table.total * size_t(r + 1) / size_t(world), end = target;
    if (muon_whole && r + 1 < world) {
      // Move the cut to the nearer edge of a Muon tensor that it would split.
      for (const ParamInfo& p : table.params) {
        if (!p.muon() || target <= p.offset || target >= p.offset + p.numel) continue;
        end = (target - p.offset < p.offset + p.numel - target) ? p.offset : p.offset + p.numel;
        break;
      }
    }
    if (r + 1 < world)  // never inside a row of a product's weight (bf16's split rows, model/split_master.h)
      for (const ParamInfo& p : table.params) {
        const int row = SplitMaster::row_of(p);
        if (!row || end <= p.offset || end >= p.offset + p.numel) continue;
        const size_t in_row = (end - p.offset) % size_t(row);
        if (in_row * 2 < size_t(row))
          end -= in_row;
        else
          end += size_t(row) - in_row;
        break;
      }
    end = std::max(end, begin);
    out[size_t(r)] = {begin, end};
    begin = end;
  }
  out.back().end = table.total;
  return out;
}

double sum_squares(const float* g, FlatRange r) {
  constexpr size_t kChunk = 1 << 14;
  const size_t n = r.size(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t b = r.begin + c * kChunk, e = std::min(r.begin + (c + 1) * kChunk, r.end);
    double s = 0;
    for (size_t i = b; i < e; ++i) s += double(g[i]) * g[i];
    partial[c] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace zaya
