#include "bench/train_step.h"

#include <algorithm>

#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/gemm.h"
#include "model/model.h"

namespace zaya::bench {

TrainStepResult measure_train_step(const ModelConfig& cfg, const TrainStepOptions& o) {
  prof::set_clock(o.profile_clock);
  if (o.bf16) {
    if (!bf16_gemm_supported()) log_warn("no bf16 GEMM on this CPU: running fp32");
    gemm_settings().precision = GemmPrecision::BF16;
  }
  Model<float> m(cfg);
  m.init(1234);
  m.use_split_master(o.bf16 && bf16_gemm_supported());  // as the trainer: no second copy of the weights
  Optimizer opt(m.layout.params, o.optimizer);
  const int N = o.batch * o.seq;
  std::vector<int32_t> ids(size_t(N) + 1);
  Philox rng(1, 2);
  std::vector<double> step_s, fwd_s, bwd_s, opt_s, gemm_s;
  double skipped = 0, choices = 0;  // routing choices over the timed steps' MoE layers
  TrainStepResult res;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    for (auto& v : ids) v = int32_t(rng.below(cfg.vocab_size));
    gemm_stats() = {};
    gemm_stats_enable(true);
    if (o.profile && s == o.warmup) prof::reset();
    prof::enable(o.profile && s >= o.warmup);
    Timer t;
    ForwardResult r;
    {
      ZAYA_PROFILE("forward");
      r = m.forward(ids.data(), ids.data() + 1, o.batch, o.seq);
    }
    double t_f = t.seconds();
    if (s >= o.warmup && cfg.use_mod)
      for (const std::vector<int64_t>& layer : m.class_counts())
        for (size_t k = 0; k < layer.size(); ++k) {
          choices += double(layer[k]);
          if (int(k) == cfg.num_experts) skipped += double(layer[k]);
        }
    {
      ZAYA_PROFILE("backward");
      m.backward(1.f, GradMode::Overwrite);  // as the trainer's first micro-batch
    }
    double t_b = t.seconds();
    gemm_stats_enable(false);
    {
      ZAYA_PROFILE("optimizer");
      bf16* p16 = m.bf16_weights();  // bf16 GEMMs: the weights' copy, written in the same pass
      opt.step(m.params.data(), m.grads.data(), 1e-4, 1.0, p16, m.split_master());
      if (p16) m.mark_bf16_weights_current();
    }
    double t_o = t.seconds();
    prof::enable(false);
    res.loss = r.loss;
    if (s < o.warmup) continue;
    step_s.push_back(t_o);
    fwd_s.push_back(t_f);
    bwd_s.push_back(t_b - t_f);
    opt_s.push_back(t_o - t_b);
    gemm_s.push_back(gemm_stats().seconds);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  res.step_s = median(step_s);
  res.forward_s = median(fwd_s);
  res.backward_s = median(bwd_s);
  res.optimizer_s = median(opt_s);
  res.gemm_fraction = median(gemm_s) / res.step_s;
  res.skip_share = choices > 0 ? skipped / choices : 0.0;
  res.peak_rss_bytes = peak_rss_bytes();
  if (o.profile) res.profile = prof::report();
  return res;
}

}  // namespace zaya::bench
