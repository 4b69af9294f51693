// zaya train --config RUN.toml [--resume] [--init-from DIR] [--steps N] [--out DIR]
//            [--precision fp32|bf16] [--optimizer adamw|muon] [--ep N] [--cp N] [--quiet] [--tensorboard]:
// pretrain as the run config says. Under `mpirun -np N` the world is DP x EP x CP.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/command.h"
#include "cli/train_progress.h"
#include "core/error.h"
#include "comm/comm.h"
#include "eval/train_tasks.h"
#include "ft/train_hooks.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace {

struct TrainArgs {
  std::string config, out, precision, optimizer, init_from;
  bool resume = false, quiet = false, tensorboard = false;
  int64_t steps = -1;
  int ep = 0, cp = 0;
  zaya::ft::FtTrainOptions ft;  // --inject, --skip-steps, --anomaly-*, --heartbeat-dir
};

void run(const TrainArgs& a) {
  zaya::RunConfig cfg = zaya::load_run_config(a.config);
  if (!a.out.empty()) {
    if (cfg.ckpt_dir == cfg.out_dir + "/ckpt") cfg.ckpt_dir = a.out + "/ckpt";
    cfg.out_dir = a.out;
  }
  if (!a.precision.empty()) cfg.bf16 = a.precision == "bf16";
  if (a.tensorboard) cfg.tensorboard = true;
  if (!a.optimizer.empty())
    cfg.optimizer.kind = zaya::parse_optimizer_kind(a.optimizer, "--optimizer");
  zaya::TrainerOptions opt;
  opt.resume = a.resume;
  opt.stop_step = a.steps;
  opt.init_from = a.init_from;
  opt.ep = a.ep;
  opt.cp = a.cp;
  zaya::TrainerHooks hooks;
  zaya::cli::install_train_progress(hooks.report, cfg.log_interval, a.quiet);
  zaya::ft::install(a.ft, opt, hooks, cfg.out_dir);
  auto self = std::make_shared<zaya::Trainer*>(nullptr);
  // [eval] tasks at validation evals
  zaya::eval::install_train_tasks(cfg, hooks, self, zaya::cli::print_train_tasks);
  zaya::Trainer trainer(std::move(cfg), opt, std::move(hooks));
  *self = &trainer;
  trainer.run();
}

// One line naming the rank, then the exit code. With peers (mpirun), a failing rank ends
// the whole job so that no survivor waits on it; an anomaly abort is agreed by every rank.
void run_guarded(const TrainArgs& a) {
  int code = 0;
  try {
    run(a);
  } catch (const zaya::AnomalyAbort& e) {
    std::fprintf(stderr, "zaya: train: %s\n", e.what());
    code = zaya::kExitAnomalies;
  } catch (const std::exception& e) {
    const bool many = zaya::comm::launched_by_mpirun();
    if (many)
      std::fprintf(stderr, "zaya: error: train rank %d: %s\n", zaya::comm::Communicator::world().rank(), e.what());
    else
      std::fprintf(stderr, "zaya: error: %s\n", e.what());
    std::fflush(stderr);
    if (many && zaya::comm::Communicator::world().size() > 1) zaya::comm::abort_world(1);
    code = 1;
  }
  std::fflush(stdout);
  if (code == 0) zaya::comm::finalize_world();
  if (code != 0) std::_Exit(code);
}

}  // namespace

ZAYA_COMMAND("train", "Pretrain a model as a run config (TOML) says: phases, optimizer, checkpoints", [](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  app.add_option("--config", a->config, "run config (TOML), e.g. configs/recipes/demo.toml")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_flag("--resume", a->resume,
               "continue from the newest checkpoint of the run (fresh start when none); any DP/EP layout");
  app.add_option("--init-from", a->init_from,
                 "start from these weights: a zaya checkpoint or an HF directory (fresh optimizer state)");
  app.add_option("--steps", a->steps,
                 "stop after this many optimizer steps in all (the LR schedule still spans the whole plan)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--out", a->out, "output directory (overrides run.out_dir)");
  app.add_option("--precision", a->precision, "override run.precision")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--optimizer", a->optimizer, "override optimizer.kind")
      ->check(CLI::IsMember(zaya::optimizer_kind_names()));
  app.add_option("--ep", a->ep, "expert-parallel degree (overrides parallel.ep; dp = world / (ep * cp))")
      ->check(CLI::PositiveNumber);
  app.add_option("--cp", a->cp, "context-parallel degree (overrides parallel.cp)")->check(CLI::PositiveNumber);
  app.add_flag("--quiet", a->quiet, "no progress lines (metrics.jsonl is still written)");
  app.add_flag("--tensorboard", a->tensorboard, "also write the metrics as TensorBoard event files in OUT/tb ([log] tensorboard)");
  zaya::ft::add_train_flags(app, a->ft);
  app.callback([a] { run_guarded(*a); });
});
