#include "train/reference_cases.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/io.h"
#include "core/rng.h"
#include "model/model.h"

namespace zaya {
namespace fs = std::filesystem;

OptimCaseResult write_optim_case(const OptimCaseOptions& o) {
  ModelConfig cfg = load_model_config(o.config);
  Model<float> m(cfg);
  m.init(o.seed);
  Optimizer opt(m.layout.params, o.optimizer);
  // One fixed random batch; the gradients change with the weights from step to step.
  Philox rng(o.seed, hash_name("optim-case.tokens"));
  const int N = o.batch * o.seq;
  std::vector<int32_t> in(static_cast<size_t>(N)), tg(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) in[size_t(i)] = int32_t(rng.below(uint64_t(cfg.vocab_size)));
  for (int i = 0; i < N; ++i) tg[size_t(i)] = int32_t(rng.below(uint64_t(cfg.vocab_size)));

  const auto& P = m.layout.params.params;
  SafetensorsWriter w;  // keeps pointers to F32 data: every array below outlives write()
  const std::vector<float> p0 = m.params;
  for (const auto& p : P) w.add_float("p0." + p.name, DType::F32, p.shape, p0.data() + p.offset);
  std::vector<std::vector<float>> grads(size_t(o.steps));
  nlohmann::json lrs = nlohmann::json::array();
  for (int t = 1; t <= o.steps; ++t) {
    m.zero_grads();
    m.forward(in.data(), tg.data(), o.batch, o.seq);
    m.backward(1.f);
    grads[size_t(t - 1)] = m.grads;
    const double lr = o.lr * (1.0 + 0.25 * (t - 1));  // varies, as a schedule would
    lrs.push_back(lr);
    opt.step(m.params.data(), m.grads.data(), lr);
  }
  for (int t = 1; t <= o.steps; ++t)
    for (const auto& p : P)
      w.add_float(cat("g", t, ".", p.name), DType::F32, p.shape, grads[size_t(t - 1)].data() + p.offset);
  for (const auto& p : P) w.add_float("final." + p.name, DType::F32, p.shape, m.params.data() + p.offset);
  fs::create_directories(o.out);
  w.write((fs::path(o.out) / "case.safetensors").string());

  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& p : P) tensors.push_back({{"name", p.name}, {"muon", opt.uses_muon(p)}, {"decay", opt.decays(p)}});
  nlohmann::json j = {{"optimizer", optimizer_kind_name(o.optimizer.kind)},
                      {"steps", o.steps},
                      {"lr", lrs},
                      {"adamw", opt.state()["adamw"]},
                      {"muon", opt.state()["muon"]},
                      {"tensors", tensors}};
  const std::string text = j.dump(1) + "\n";
  write_file_atomic((fs::path(o.out) / "case.json").string(), text.data(), text.size());
  return {P.size()};
}

ReferenceCaseResult write_reference_case(const ReferenceCaseOptions& o) {
  ModelConfig cfg = load_model_config(o.config);
  if (o.topk) cfg.topk = o.topk;
  cfg.init_std = 0.2;  // visible routing decisions and non-trivial attention
  cfg.validate();
  const int B = o.batch, T = o.seq, N = B * T;
  Model<float> m(cfg);
  Model<double> md(cfg);  // to pick weights whose routing is far from ties
  std::vector<int32_t> ids(size_t(B) * (T + 1)), in(N), tgt(N);
  double margin = 0;
  uint64_t seed = o.seed;
  for (int attempt = 0; attempt < 200; ++attempt, ++seed) {
    randomize_for_checks(m.layout, seed, m.params.data(), m.buffers.data());
    Philox r(seed, 11);
    for (auto& v : ids) v = int32_t(r.below(cfg.vocab_size));
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        in[b * T + t] = ids[size_t(b) * (T + 1) + t];
        tgt[b * T + t] = ids[size_t(b) * (T + 1) + t + 1];
      }
    std::copy(m.params.begin(), m.params.end(), md.params.begin());
    std::copy(m.buffers.begin(), m.buffers.end(), md.buffers.begin());
    md.forward(in.data(), tgt.data(), B, T);
    margin = md.min_routing_margin();
    int64_t skip = 0, routed = 0;  // exercise both the experts and the skip class
    for (auto& cc : md.class_counts()) {
      skip += cfg.use_mod ? cc.back() : 1;
      for (int e = 0; e < cfg.num_experts; ++e) routed += cc[e];
    }
    if (margin > 1e-3 && skip > 0 && routed > 0) break;
    margin = 0;
  }
  if (margin <= 1e-3) fail("could not find weights whose routing is away from ties");
  fs::create_directories(o.out);
  save_hf_dir(o.out, m, DType::F32, 0, /*check_hf_compat=*/false);
  {
    std::ofstream f(fs::path(o.out) / "ids.txt");
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t <= T; ++t) f << (t ? " " : "") << ids[size_t(b) * (T + 1) + t];
      f << "\n";
    }
  }
  auto r = m.forward(in.data(), tgt.data(), B, T);
  std::vector<float> logits(size_t(N) * cfg.vocab_size);  // copied: backward reuses the buffer
  if (m.logits())
    std::copy_n(m.logits(), logits.size(), logits.begin());
  else  // bf16 products: the logits are kept in bf16 only
    convert_from_bf16(m.logits16(), logits.data(), logits.size());
  m.zero_grads();
  m.backward();
  SafetensorsWriter w;
  w.add_float("logits", DType::F32, {B, T, cfg.vocab_size}, logits.data());
  float loss = float(r.loss);
  w.add_float("loss", DType::F32, {1}, &loss);
  for (const auto& p : m.layout.params.params)
    w.add_float("grad." + p.name, DType::F32, p.shape, m.grads.data() + p.offset);
  w.write((fs::path(o.out) / "zaya.safetensors").string());
  return {cfg.topk, r.loss, margin, seed};
}

}  // namespace zaya
