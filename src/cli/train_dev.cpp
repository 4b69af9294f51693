// zaya optim-case (hidden; behind tests/optim_reference.sh): a few optimizer steps on a
// real model's gradients, written for the PyTorch reference (tools/reference/optim_ref.py);
// the files are described in train/reference_cases.h.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "train/reference_cases.h"

namespace {

struct CaseArgs {
  std::string config, out, optimizer = "adamw";
  int steps = 3, batch = 2, seq = 16;
  uint64_t seed = 5;
  double lr = 1e-2, weight_decay = 0.1;
};

void optim_case(const CaseArgs& a) {
  zaya::OptimCaseOptions o;
  o.config = a.config;
  o.out = a.out;
  o.optimizer.kind = zaya::parse_optimizer_kind(a.optimizer, "--optimizer");
  o.optimizer.adamw.weight_decay = a.weight_decay;
  o.steps = a.steps;
  o.batch = a.batch;
  o.seq = a.seq;
  o.seed = a.seed;
  o.lr = a.lr;
  const zaya::OptimCaseResult r = zaya::write_optim_case(o);
  std::printf("optim-case: %s, %d steps, %zu tensors -> %s\n", a.optimizer.c_str(), a.steps, r.tensors, a.out.c_str());
}

}  // namespace

ZAYA_COMMAND("optim-case", "Optimizer steps for the PyTorch reference (developer tool)", [](CLI::App& app) {
  app.group("");  // hidden from --help
  auto a = std::make_shared<CaseArgs>();
  app.add_option("--config", a->config, "model config")->required();
  app.add_option("--out", a->out, "output directory")->required();
  app.add_option("--optimizer", a->optimizer, "adamw or muon")->check(CLI::IsMember(zaya::optimizer_kind_names()));
  app.add_option("--steps", a->steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--seed", a->seed, "seed");
  app.add_option("--lr", a->lr, "learning rate of step 1");
  app.add_option("--weight-decay", a->weight_decay, "weight decay");
  app.callback([a] { optim_case(*a); });
});
