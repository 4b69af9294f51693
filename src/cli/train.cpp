// zaya train --config RUN.toml [--resume] [--steps N] [--out DIR] [--precision fp32|bf16]
//            [--optimizer adamw|muon] [--quiet]: pretrain as the run config says.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace {

struct TrainArgs {
  std::string config, out, precision, optimizer;
  bool resume = false, quiet = false;
  int64_t steps = -1;
};

void run(const TrainArgs& a) {
  zaya::RunConfig cfg = zaya::load_run_config(a.config);
  if (!a.out.empty()) {
    if (cfg.ckpt_dir == cfg.out_dir + "/ckpt") cfg.ckpt_dir = a.out + "/ckpt";
    cfg.out_dir = a.out;
  }
  if (!a.precision.empty()) cfg.bf16 = a.precision == "bf16";
  if (!a.optimizer.empty())
    cfg.optimizer.kind = a.optimizer == "muon" ? zaya::OptimizerKind::Muon : zaya::OptimizerKind::AdamW;
  zaya::TrainerOptions opt;
  opt.resume = a.resume;
  opt.stop_step = a.steps;
  opt.progress = !a.quiet;
  zaya::Trainer trainer(std::move(cfg), opt);
  trainer.run();
}

}  // namespace

ZAYA_COMMAND("train", "Pretrain a model as a run config (TOML) says: phases, optimizer, checkpoints", [](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  app.add_option("--config", a->config, "run config (TOML), e.g. configs/recipes/demo.toml")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_flag("--resume", a->resume, "continue from the newest checkpoint of the run (fresh start when none)");
  app.add_option("--steps", a->steps,
                 "stop after this many optimizer steps in all (the LR schedule still spans the whole plan)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--out", a->out, "output directory (overrides run.out_dir)");
  app.add_option("--precision", a->precision, "override run.precision")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--optimizer", a->optimizer, "override optimizer.kind")->check(CLI::IsMember({"adamw", "muon"}));
  app.add_flag("--quiet", a->quiet, "no progress lines (metrics.jsonl is still written)");
  app.callback([a] { run(*a); });
});
