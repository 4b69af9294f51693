// zaya dist-check (hidden; behind tests/dist_*.sh): the flags of the distributed agreement
// check (train/dist_check.h) and what rank 0 prints: the layout, per-step loss and grad
// norm, throughput and peak RSS, then the final weights (global layout, all experts) as a
// hash and max |w|; --out writes them raw (fp32, build_layout(cfg) order), --compare FILE
// reports the largest difference from FILE and fails above --tol.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/command.h"
#include "comm/comm.h"
#include "train/dist_check.h"
#include "train/optim.h"

namespace {
using namespace zaya;

struct Args {
  std::string optimizer = "muon", out, compare;
  double tol = 1e-4;
  bool no_zero1 = false, no_overlap = false;
  DistCheckOptions run;
};

void run(const Args& a) {
  DistCheckOptions o = a.run;
  o.optimizer = parse_optimizer_kind(a.optimizer, "--optimizer");
  o.zero1 = !a.no_zero1;
  o.overlap = !a.no_overlap;
  bool root = false;
  DistCheckCallbacks cb;
  cb.on_start = [&](const DistCheckSetup& s) {
    root = s.root;
    if (root)
      std::printf("dist-check: world %d = dp %d x ep %d, %s, %s, global batch %d x %d, shard [%zu, %zu) of %zu\n",
                  s.world, s.dp, s.ep, o.zero1 ? "ZeRO-1" : "plain DP (no ZeRO-1)", optimizer_kind_name(o.optimizer),
                  o.batch, o.seq, s.shard.begin, s.shard.end, s.params);
  };
  cb.on_step = [&](const DistCheckStep& s) {
    if (root)
      std::printf("step %d loss %.9f gnorm %.9f time_ms %.2f comm_ms %.2f (exposed grad reduce %.2f, gather %.2f, ep a2a %.2f)\n",
                  s.step, s.loss, s.grad_norm, s.seconds * 1e3, s.comm_seconds * 1e3, s.exposed_reduce_seconds * 1e3,
                  s.gather_seconds * 1e3, s.ep_all_to_all_seconds * 1e3);
    if (s.step == o.steps) std::fflush(stdout);  // every step line out before the collectives that follow
  };
  const DistCheckResult r = run_dist_check(o, cb);
  if (!root) return;
  // Figures: tokens/s after the first step, communication per step, peak RSS per rank.
  if (o.steps > 1) {
    std::printf("throughput: %.1f tokens/s, %.2f ms/step, comm %.2f ms/step\n", r.tokens_per_second,
                r.seconds_per_step * 1e3, r.comm_seconds_per_step * 1e3);
    for (size_t k = 0; k < r.peak_rss_mb.size(); ++k) std::printf("peak_rss_mb rank %zu %.1f\n", k, r.peak_rss_mb[k]);
  }
  std::printf("final: %zu params, hash %016llx, max|w| %.9g\n", r.weights.size(), (unsigned long long)r.weights_hash,
              r.max_abs_weight);
  if (!a.out.empty()) write_weights(a.out, r.weights);
  if (!a.compare.empty()) {
    const WeightDiff d = compare_weights(r.weights, a.compare);
    std::printf("compare: max_abs_diff %.3g max_rel_diff %.3g (tol %.3g), %zu non-finite, vs %s\n", d.max_abs,
                d.max_rel, a.tol, d.nonfinite, a.compare.c_str());
    check_weight_diff(d, a.tol, a.compare);
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
  app.add_option("--config", a->run.config, "model config");
  app.add_option("--steps", a->run.steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch", a->run.batch, "global batch (sequences)")->check(CLI::PositiveNumber);
  app.add_option("--seq", a->run.seq, "sequence length")->check(CLI::PositiveNumber);
  app.add_option("--ep", a->run.ep, "expert-parallel ranks (dp = world / ep)")->check(CLI::PositiveNumber);
  app.add_option("--optimizer", a->optimizer, "adamw or muon")->check(CLI::IsMember(optimizer_kind_names()));
  app.add_option("--lr", a->run.lr, "learning rate");
  app.add_option("--clip", a->run.clip, "gradient-norm clip");
  app.add_option("--seed", a->run.seed, "seed");
  app.add_option("--bucket", a->run.bucket, "reduce-scatter bucket (fp32 elements)")->check(CLI::PositiveNumber);
  app.add_flag("--no-zero1", a->no_zero1, "plain DP: all-reduce, replicated optimizer");
  app.add_flag("--no-overlap", a->no_overlap, "reduce gradients only after backward (no overlap)");
  app.add_flag("--mpi", a->run.force_mpi, "initialise MPI even without mpirun");
  app.add_option("--comm-timeout", a->run.comm_timeout, "seconds before a wait on a peer fails");
  app.add_option("--die-at-step", a->run.die_at, "fault injection: --die-rank exits at this step");
  app.add_flag("--hang", a->run.hang, "with --die-at-step: the rank hangs instead of exiting");
  app.add_option("--die-rank", a->run.die_rank, "rank that exits (with --die-at-step)");
  app.add_option("--out", a->out, "write final params (fp32, global layout) here");
  app.add_option("--compare", a->compare, "compare final params with this file");
  app.add_option("--tol", a->tol, "max abs difference allowed by --compare");
  app.callback([a] { run_guarded(*a); });
});
