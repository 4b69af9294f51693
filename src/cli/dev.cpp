// zaya dev: developer tools behind the correctness tests.
//   reference-case: writes a model with non-trivial random weights in HF format, a batch
//   of ids, and zaya's logits, loss and every parameter gradient (fp32), for the
//   independent PyTorch reference (tools/reference) to recompute and compare.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "ckpt/hf.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"

namespace {

struct CaseOpts {
  std::string config, out;
  int batch = 2, seq = 16, topk = 0;
  uint64_t seed = 7;
};

void reference_case(const CaseOpts& o) {
  namespace fs = std::filesystem;
  zaya::ModelConfig cfg = zaya::load_model_config(o.config);
  if (o.topk) cfg.topk = o.topk;
  cfg.init_std = 0.2;  // visible routing decisions and non-trivial attention
  cfg.validate();
  const int B = o.batch, T = o.seq, N = B * T;
  zaya::Model<float> m(cfg);
  zaya::Model<double> md(cfg);  // to pick weights whose routing is far from ties
  std::vector<int32_t> ids(size_t(B) * (T + 1)), in(N), tgt(N);
  double margin = 0;
  uint64_t seed = o.seed;
  for (int attempt = 0; attempt < 200; ++attempt, ++seed) {
    zaya::randomize_for_checks(m.layout, seed, m.params.data(), m.buffers.data());
    zaya::Philox r(seed, 11);
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
  if (margin <= 1e-3) zaya::fail("could not find weights whose routing is away from ties");
  fs::create_directories(o.out);
  zaya::save_hf_dir(o.out, m, zaya::DType::F32, 0, /*check_hf_compat=*/false);
  {
    std::ofstream f(fs::path(o.out) / "ids.txt");
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t <= T; ++t) f << (t ? " " : "") << ids[size_t(b) * (T + 1) + t];
      f << "\n";
    }
  }
  auto r = m.forward(in.data(), tgt.data(), B, T);
  std::vector<float> logits(m.logits(), m.logits() + size_t(N) * cfg.vocab_size);  // backward reuses the buffer
  m.zero_grads();
  m.backward();
  zaya::SafetensorsWriter w;
  w.add_float("logits", zaya::DType::F32, {B, T, cfg.vocab_size}, logits.data());
  float loss = float(r.loss);
  w.add_float("loss", zaya::DType::F32, {1}, &loss);
  for (const auto& p : m.layout.params.params)
    w.add_float("grad." + p.name, zaya::DType::F32, p.shape, m.grads.data() + p.offset);
  w.write((fs::path(o.out) / "zaya.safetensors").string());
  std::printf("reference case in %s: B=%d T=%d top-k=%d loss=%.6f routing margin=%.2e seed=%lu\n", o.out.c_str(), B,
              T, cfg.topk, r.loss, margin, (unsigned long)(seed));
}

}  // namespace

ZAYA_COMMAND("dev", "Developer tools behind the correctness tests", [](CLI::App& app) {
  app.require_subcommand(1);
  auto o = std::make_shared<CaseOpts>();
  auto* rc = app.add_subcommand("reference-case", "Write a model, ids and zaya's logits/loss/gradients for the PyTorch reference");
  rc->add_option("--config", o->config, "model config")->required();
  rc->add_option("--out", o->out, "output directory")->required();
  rc->add_option("--batch", o->batch, "batch size")->check(CLI::PositiveNumber);
  rc->add_option("--seq", o->seq, "sequence length")->check(CLI::PositiveNumber);
  rc->add_option("--seed", o->seed, "seed");
  rc->add_option("--topk", o->topk, "override moe_router_topk");
  rc->callback([o] { reference_case(*o); });
});
