#include "train/dist_check.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <thread>

#include "comm/comm.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "model/model.h"
#include "parallel/parallelize.h"
#include "parallel/zero1.h"
#include "train/balancer.h"

namespace zaya {
namespace {

double peak_rss_mb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

// All parameters in the global layout (all experts), on world rank 0; empty elsewhere.
std::vector<float> gather_global(const ModelConfig& cfg, const Model<float>& m, const comm::Groups& g) {
  const comm::Layout& L = g.layout;
  std::vector<float> full;
  if (L.dp_rank != 0) return full;  // DP replicas hold the same weights
  if (L.ep_rank != 0) {
    g.ep.send(m.params.data(), m.params.size(), 0, 11);
    return full;
  }
  const ModelLayout glob = build_layout(cfg);
  full.assign(glob.params.total, 0.f);
  std::vector<float> peer(m.params.size());
  for (int q = 0; q < L.ep; ++q) {
    const float* src = m.params.data();
    if (q > 0) g.ep.recv(peer.data(), peer.size(), q, 11), src = peer.data();
    comm::Layout lq = L;
    lq.ep_rank = q;
    const ModelLayout local = build_layout(cfg, parallel::local_experts(cfg, lq));
    for (const ParamInfo& p : local.params.params) {
      const ParamInfo* gp = glob.params.find(p.name);
      ZAYA_CHECK(gp && gp->numel == p.numel, "dist-check: tensor ", p.name, " missing from the global layout");
      std::memcpy(full.data() + gp->offset, src + p.offset, p.numel * sizeof(float));
    }
  }
  return full;
}

// Step `step`'s rows of this data rank: B random-token sequences of T (+1 for the targets).
void fill_batch(const DistCheckOptions& o, const ModelConfig& cfg, int step, int data_rank, int B, int T,
                std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  for (int r = 0; r < B; ++r) {
    const uint64_t sample = uint64_t(step) * 1000003ull + uint64_t(data_rank * B + r);
    Philox p(o.seed, sample);
    int32_t prev = int32_t(p.below(uint64_t(cfg.vocab_size)));
    for (int t = 0; t < T; ++t) {
      const int32_t next = int32_t(p.below(uint64_t(cfg.vocab_size)));
      in[size_t(r) * T + t] = prev, tg[size_t(r) * T + t] = next, prev = next;
    }
  }
}

void inject_fault(const DistCheckOptions& o, int rank, int step) {
  std::fprintf(stderr, "dist-check: rank %d %s at step %d (fault injection)\n", rank, o.hang ? "hangs" : "exits", step);
  std::fflush(stderr);
  if (!o.hang) std::_Exit(3);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // a hung rank: peers must time out
}

}  // namespace

DistCheckResult run_dist_check(const DistCheckOptions& o, const DistCheckCallbacks& cb) {
  comm::init_world(o.force_mpi);
  comm::set_timeout(o.comm_timeout);
  comm::Communicator& world = comm::Communicator::world();
  const comm::Groups g = comm::make_groups(world, 0, o.ep, 1);
  const comm::Layout& L = g.layout;
  const ModelConfig cfg = load_model_config(o.config);
  ZAYA_CHECK(o.batch % L.data_world() == 0, "dist-check: --batch ", o.batch, " is not a multiple of dp*ep = ",
             L.data_world());
  const int B = o.batch / L.data_world(), T = o.seq;

  Model<float> m(cfg, parallel::local_experts(cfg, L));
  m.init(o.seed);
  parallel::ParallelSeams seams = parallel::parallelize(m, g);
  m.reserve(B, T);
  OptimizerSettings os;
  os.kind = o.optimizer;
  parallel::Zero1 z(m.layout.params, g, {o.bucket, o.zero1});
  Optimizer opt(m.layout.params, os, z.owned());
  RouterBalancer bal(m.layout, BalancerSettings{});

  DistCheckResult res;
  res.setup = {world.rank() == 0, world.size(), L.dp, L.ep, z.owned(), m.params.size()};
  if (cb.on_start) cb.on_start(res.setup);

  std::vector<int32_t> in(size_t(B) * T), tg(size_t(B) * T);
  const double count_all = double(o.batch) * T;
  double t_steps = 0, comm_s = 0;
  for (int step = 1; step <= o.steps; ++step) {
    if (step == o.die_at && world.rank() == o.die_rank) inject_fault(o, world.rank(), step);
    Timer timer;
    z.stats().clear();
    seams.clear_comm_seconds();
    fill_batch(o, cfg, step, L.data_rank(), B, T, in, tg);
    const ForwardResult f = m.forward(in.data(), tg.data(), B, T);
    z.begin(m.grads.data());
    if (o.overlap) m.grads_ready = [&z](size_t from) { z.grads_ready(from); };
    // sum over ranks = gradient of the global mean; written over the last step's (as the trainer)
    m.backward(float(f.count / count_all), GradMode::Overwrite);
    m.grads_ready = nullptr;
    z.finish();
    bal.clear_counts();
    bal.add_counts(m.class_counts());
    z.all_reduce_sum(bal.counts().data(), bal.counts().size());
    double loss_sum = f.loss_sum;
    z.all_reduce_sum(&loss_sum, 1);
    const double norm = z.grad_norm();
    const double scale = norm > o.clip ? o.clip / norm : 1.0;
    opt.step(m.params.data(), z.grads(), o.lr, scale);
    z.gather(m.params.data());
    bal.update(m.buffers.data());

    DistCheckStep s;
    s.step = step;
    s.seconds = timer.seconds();
    s.ep_all_to_all_seconds = seams.comm_seconds();
    s.comm_seconds = z.stats().total() + s.ep_all_to_all_seconds;
    s.exposed_reduce_seconds = z.stats().exposed_s;
    s.gather_seconds = z.stats().gather_s;
    s.loss = loss_sum / count_all;
    s.grad_norm = norm;
    if (step > 1) t_steps += s.seconds, comm_s += s.comm_seconds;
    res.steps.push_back(s);
    if (cb.on_step) cb.on_step(s);
  }
  if (o.steps > 1) {
    res.tokens_per_second = count_all * (o.steps - 1) / std::max(t_steps, 1e-9);
    res.seconds_per_step = t_steps / (o.steps - 1);
    res.comm_seconds_per_step = comm_s / (o.steps - 1);
  }
  res.peak_rss_mb.assign(size_t(world.size()), 0.0);
  res.peak_rss_mb[size_t(world.rank())] = peak_rss_mb();
  world.all_reduce(res.peak_rss_mb.data(), res.peak_rss_mb.size());

  res.weights = gather_global(cfg, m, g);
  for (float v : res.weights) res.max_abs_weight = std::max(res.max_abs_weight, double(std::fabs(v)));
  res.weights_hash = hash_name(
      std::string_view(reinterpret_cast<const char*>(res.weights.data()), res.weights.size() * sizeof(float)));
  return res;
}

void write_weights(const std::string& path, const std::vector<float>& w) {
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size() * sizeof(float)));
  ZAYA_CHECK(o.good(), "dist-check: cannot write ", path);
}

WeightDiff compare_weights(const std::vector<float>& w, const std::string& path) {
  std::ifstream i(path, std::ios::binary);
  std::vector<float> ref(w.size());
  i.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * sizeof(float)));
  ZAYA_CHECK(i.gcount() == std::streamsize(ref.size() * sizeof(float)) && i.peek() == EOF, "dist-check: ", path,
             " does not hold ", ref.size(), " fp32 parameters");
  // std::max(x, NaN) keeps x and NaN > tol is false: non-finite weights are counted apart
  // and fail the check, even when both sides hold the same NaN (a diverged run).
  WeightDiff d;
  for (size_t k = 0; k < w.size(); ++k) {
    if (!std::isfinite(w[k]) || !std::isfinite(ref[k])) {
      ++d.nonfinite;
      continue;
    }
    const double diff = std::fabs(double(w[k]) - ref[k]);
    d.max_abs = std::max(d.max_abs, diff);
    d.max_rel = std::max(d.max_rel, diff / std::max(std::fabs(double(ref[k])), 1e-3));
  }
  return d;
}

void check_weight_diff(const WeightDiff& d, double tol, const std::string& path) {
  ZAYA_CHECK(d.nonfinite == 0, "dist-check: ", d.nonfinite, " weights are NaN or infinite (in this run or in ", path,
             ")");
  ZAYA_CHECK(d.max_abs <= tol, "dist-check: weights differ from ", path, " by ", d.max_abs, " > tolerance ", tol);
}

}  // namespace zaya
