// zaya dist-check (hidden; behind tests/dist_*.sh): N training steps of a model config on
// random tokens with Model + Optimizer + ZeRO-1 / expert parallel, for any DP x EP layout.
// Sample i of the global batch of step s is a pure function of (seed, s, i), and rank
// (dp, ep) takes the global samples [data_rank * local, (data_rank + 1) * local): the same
// global batch whatever the layout. Rank 0 prints per-step loss and grad norm, then the
// final weights (global layout, all experts) as a hash and max |w|, and writes them raw
// (fp32, build_layout(cfg) order) to --out; --compare FILE reports the largest difference.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <thread>
#include <chrono>

#include "cli/command.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "comm/comm.h"
#include "parallel/expert_parallel.h"
#include "parallel/zero1.h"
#include "train/optim.h"
#include "model/model.h"
#include "train/balancer.h"

namespace {
using namespace zaya;

struct Args {
  std::string config = "configs/zaya1-tiny.toml", optimizer = "muon", out, compare;
  int steps = 20, batch = 8, seq = 16, ep = 1, die_at = -1, die_rank = 1;
  uint64_t seed = 7;
  double lr = 1e-2, clip = 1.0, timeout = 300, tol = 1e-4;
  size_t bucket = size_t(1) << 20;
  bool no_zero1 = false, force_mpi = false, hang = false, no_overlap = false;
};

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
    const ModelLayout lq = L.ep > 1 ? build_layout(cfg, parallel::ep_expert_range(cfg.num_experts, L.ep, q)) : glob;
    for (const ParamInfo& p : lq.params.params) {
      const ParamInfo* gp = glob.params.find(p.name);
      ZAYA_CHECK(gp && gp->numel == p.numel, "dist-check: tensor ", p.name, " missing from the global layout");
      std::memcpy(full.data() + gp->offset, src + p.offset, p.numel * sizeof(float));
    }
  }
  return full;
}

void run(const Args& a) {
  comm::init_world(a.force_mpi);
  comm::set_timeout(a.timeout);
  comm::Communicator& world = comm::Communicator::world();
  const comm::Groups g = comm::make_groups(world, 0, a.ep, 1);
  const comm::Layout& L = g.layout;
  const bool root = world.rank() == 0;
  const ModelConfig cfg = load_model_config(a.config);
  ZAYA_CHECK(a.batch % L.data_world() == 0, "dist-check: --batch ", a.batch, " is not a multiple of dp*ep = ",
             L.data_world());
  const int B = a.batch / L.data_world(), T = a.seq;

  const ExpertRange er = L.ep > 1 ? parallel::ep_expert_range(cfg.num_experts, L.ep, L.ep_rank) : ExpertRange{};
  Model<float> m(cfg, er);
  m.init(a.seed);
  parallel::EpExperts<float>* epx = nullptr;
  if (L.ep > 1) {
    auto e = std::make_unique<parallel::EpExperts<float>>(g.ep, er, cfg.num_layers);
    epx = e.get();
    m.set_experts(std::move(e));
  }
  m.reserve(B, T);
  OptimizerSettings os;
  os.kind = a.optimizer == "muon" ? OptimizerKind::Muon : OptimizerKind::AdamW;
  parallel::Zero1 z(m.layout.params, g, {a.bucket, !a.no_zero1});
  Optimizer opt(m.layout.params, os, z.owned());
  RouterBalancer bal(m.layout, BalancerSettings{});
  if (root)
    std::printf("dist-check: world %d = dp %d x ep %d, %s, %s, global batch %d x %d, shard [%zu, %zu) of %zu\n",
                world.size(), L.dp, L.ep, a.no_zero1 ? "plain DP (no ZeRO-1)" : "ZeRO-1", a.optimizer.c_str(),
                a.batch, T, z.owned().begin, z.owned().end, m.params.size());

  std::vector<int32_t> in(size_t(B) * T), tg(size_t(B) * T);
  const double count_all = double(a.batch) * T;
  double t_steps = 0, comm_s = 0;
  for (int step = 1; step <= a.steps; ++step) {
    if (step == a.die_at && world.rank() == a.die_rank) {
      std::fprintf(stderr, "dist-check: rank %d %s at step %d (fault injection)\n", world.rank(),
                   a.hang ? "hangs" : "exits", step);
      std::fflush(stderr);
      if (!a.hang) std::_Exit(3);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // a hung rank: peers must time out
    }
    Timer timer;
    z.stats().clear();
    if (epx) epx->comm_seconds = 0;
    for (int r = 0; r < B; ++r) {
      const uint64_t sample = uint64_t(step) * 1000003ull + uint64_t(L.data_rank() * B + r);
      Philox p(a.seed, sample);
      int32_t prev = int32_t(p.below(uint64_t(cfg.vocab_size)));
      for (int t = 0; t < T; ++t) {
        const int32_t next = int32_t(p.below(uint64_t(cfg.vocab_size)));
        in[size_t(r) * T + t] = prev, tg[size_t(r) * T + t] = next, prev = next;
      }
    }
    m.zero_grads();
    const ForwardResult f = m.forward(in.data(), tg.data(), B, T);
    z.begin(m.grads.data());
    if (!a.no_overlap) m.grads_ready = [&z](size_t from) { z.grads_ready(from); };
    m.backward(float(f.count / count_all));  // sum over ranks = gradient of the global mean
    m.grads_ready = nullptr;
    z.finish();
    bal.clear_counts();
    bal.add_counts(m.class_counts());
    z.all_reduce_sum(bal.counts().data(), bal.counts().size());
    double loss_sum = f.loss_sum;
    z.all_reduce_sum(&loss_sum, 1);
    const double norm = z.grad_norm();
    const double scale = norm > a.clip ? a.clip / norm : 1.0;
    opt.step(m.params.data(), z.grads(), a.lr, scale);
    z.gather(m.params.data());
    bal.update(m.buffers.data());
    const double dt = timer.seconds();
    const double cs = z.stats().total() + (epx ? epx->comm_seconds : 0);
    if (step > 1) t_steps += dt, comm_s += cs;
    if (root)
      std::printf("step %d loss %.9f gnorm %.9f time_ms %.2f comm_ms %.2f (exposed grad reduce %.2f, gather %.2f, ep a2a %.2f)\n",
                  step, loss_sum / count_all, norm, dt * 1e3, cs * 1e3, z.stats().exposed_s * 1e3,
                  z.stats().gather_s * 1e3, epx ? epx->comm_seconds * 1e3 : 0.0);
  }
  std::fflush(stdout);
  // Figures: tokens/s after the first step, communication per step, peak RSS per rank.
  std::vector<double> rss(size_t(world.size()), 0.0);
  rss[size_t(world.rank())] = peak_rss_mb();
  world.all_reduce(rss.data(), rss.size());
  if (root && a.steps > 1) {
    std::printf("throughput: %.1f tokens/s, %.2f ms/step, comm %.2f ms/step\n",
                count_all * (a.steps - 1) / std::max(t_steps, 1e-9), t_steps * 1e3 / (a.steps - 1),
                comm_s * 1e3 / (a.steps - 1));
    for (size_t r = 0; r < rss.size(); ++r) std::printf("peak_rss_mb rank %zu %.1f\n", r, rss[r]);
  }

  const std::vector<float> full = gather_global(cfg, m, g);
  if (!root) return;
  double maxabs = 0;
  for (float v : full) maxabs = std::max(maxabs, double(std::fabs(v)));
  const uint64_t h = hash_name(std::string_view(reinterpret_cast<const char*>(full.data()), full.size() * sizeof(float)));
  std::printf("final: %zu params, hash %016llx, max|w| %.9g\n", full.size(), (unsigned long long)h, maxabs);
  if (!a.out.empty()) {
    std::ofstream o(a.out, std::ios::binary);
    o.write(reinterpret_cast<const char*>(full.data()), std::streamsize(full.size() * sizeof(float)));
    ZAYA_CHECK(o.good(), "dist-check: cannot write ", a.out);
  }
  if (!a.compare.empty()) {
    std::ifstream i(a.compare, std::ios::binary);
    std::vector<float> ref(full.size());
    i.read(reinterpret_cast<char*>(ref.data()), std::streamsize(ref.size() * sizeof(float)));
    ZAYA_CHECK(i.gcount() == std::streamsize(ref.size() * sizeof(float)) && i.peek() == EOF, "dist-check: ", a.compare,
               " does not hold ", ref.size(), " fp32 parameters");
    // std::max(x, NaN) keeps x and NaN > tol is false: non-finite weights are counted apart
    // and fail the check, even when both sides hold the same NaN (a diverged run).
    double dmax = 0, rmax = 0;
    size_t nonfinite = 0;
    for (size_t k = 0; k < full.size(); ++k) {
      if (!std::isfinite(full[k]) || !std::isfinite(ref[k])) {
        ++nonfinite;
        continue;
      }
      const double d = std::fabs(double(full[k]) - ref[k]);
      dmax = std::max(dmax, d);
      rmax = std::max(rmax, d / std::max(std::fabs(double(ref[k])), 1e-3));
    }
    std::printf("compare: max_abs_diff %.3g max_rel_diff %.3g (tol %.3g), %zu non-finite, vs %s\n", dmax, rmax, a.tol,
                nonfinite, a.compare.c_str());
    ZAYA_CHECK(nonfinite == 0, "dist-check: ", nonfinite, " weights are NaN or infinite (in this run or in ", a.compare,
               ")");
    ZAYA_CHECK(dmax <= a.tol, "dist-check: weights differ from ", a.compare, " by ", dmax, " > tolerance ", a.tol);
  }
}

void run_guarded(const Args& a) {
  try {
    run(a);
  } catch (const std::exception& e) {
    // One clear line, then end the whole job (never leave peers waiting on this rank).
    const int r = comm::launched_by_mpirun() ? std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")) : 0;
    std::fprintf(stderr, "error: dist-check rank %d: %s\n", r, e.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
  comm::finalize_world();
}

}  // namespace

ZAYA_COMMAND("dist-check", "Distributed training agreement check (developer tool)", [](CLI::App& app) {
  app.group("");  // hidden from --help
  auto a = std::make_shared<Args>();
  app.add_option("--config", a->config, "model config");
  app.add_option("--steps", a->steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch", a->batch, "global batch (sequences)")->check(CLI::PositiveNumber);
  app.add_option("--seq", a->seq, "sequence length")->check(CLI::PositiveNumber);
  app.add_option("--ep", a->ep, "expert-parallel ranks (dp = world / ep)")->check(CLI::PositiveNumber);
  app.add_option("--optimizer", a->optimizer, "adamw or muon")->check(CLI::IsMember({"adamw", "muon"}));
  app.add_option("--lr", a->lr, "learning rate");
  app.add_option("--clip", a->clip, "gradient-norm clip");
  app.add_option("--seed", a->seed, "seed");
  app.add_option("--bucket", a->bucket, "reduce-scatter bucket (fp32 elements)")->check(CLI::PositiveNumber);
  app.add_flag("--no-zero1", a->no_zero1, "plain DP: all-reduce, replicated optimizer");
  app.add_flag("--no-overlap", a->no_overlap, "reduce gradients only after backward (no overlap)");
  app.add_flag("--mpi", a->force_mpi, "initialise MPI even without mpirun");
  app.add_option("--comm-timeout", a->timeout, "seconds before a wait on a peer fails");
  app.add_option("--die-at-step", a->die_at, "fault injection: --die-rank exits at this step");
  app.add_flag("--hang", a->hang, "with --die-at-step: the rank hangs instead of exiting");
  app.add_option("--die-rank", a->die_rank, "rank that exits (with --die-at-step)");
  app.add_option("--out", a->out, "write final params (fp32, global layout) here");
  app.add_option("--compare", a->compare, "compare final params with this file");
  app.add_option("--tol", a->tol, "max abs difference allowed by --compare");
  app.callback([a] { run_guarded(*a); });
});
