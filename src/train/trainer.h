// The training loop: plan -> (phase switch) -> batch -> micro-batches forward/backward ->
// global gradient norm, clipping -> optimizer step -> router balancing -> metrics, progress,
// periodic validation and checkpoints. run() reads top to bottom; each stage is one
// member function below it.
//
// One process today. The places where a data-parallel run adds communication are marked
// "DP:" (all-reduce of gradients or reduce-scatter for ZeRO-1, of the loss sums and of the
// router counts); the optimizer already steps a FlatRange and the loader already hands out
// a rank's rows of the global batch.
//
// Exact resume: everything a step depends on is either a pure function of (config, step)
// (the plan, the LR) or saved in the checkpoint (weights, optimizer and balancer state,
// loader state). Stopping after N steps and resuming for M gives the same bits as N + M
// straight steps.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/balancer.h"
#include "train/loader.h"
#include "train/optim.h"
#include "train/run_config.h"
#include "train/schedule.h"

namespace zaya {

struct StepRecord {
  int64_t step = 0;  // steps completed, this one included
  int phase = 0;
  int global_batch = 0, seq_len = 0;
  double loss = 0, aux_loss = 0, lr = 0, grad_norm = 0;
  bool clipped = false, skipped = false;  // skipped: non-finite loss or gradient norm, no update
  uint64_t tokens = 0;                    // tokens trained, this step included
  double seconds = 0, tokens_per_second = 0;
  LayerLoad worst_load;
  std::vector<LayerLoad> loads;
};

struct EvalRecord {
  int64_t step = 0;
  double loss = 0;  // mean nats/token over every validation window of every source
  int64_t tokens = 0;
  std::vector<std::pair<std::string, double>> per_source;
};

struct TrainerOptions {
  bool resume = false;      // continue from the newest checkpoint (fresh start when there is none)
  int64_t stop_step = -1;   // stop after this many steps in all (the schedule is unchanged)
  bool progress = true;     // progress lines on stdout
  bool metrics = true;      // out_dir/metrics.jsonl
  bool save_final = true;   // checkpoint when the loop ends
};

// Points where outside code watches the loop. issue 8's per-rank heartbeat (step, phase,
// timestamp, step time) hangs on `heartbeat`, called with "start", "step", "eval",
// "checkpoint" and "done".
struct TrainerHooks {
  std::function<void(const char* stage, int64_t step, double step_seconds)> heartbeat;
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const EvalRecord&)> on_eval;
};

class Trainer {
 public:
  Trainer(RunConfig cfg, TrainerOptions opt = {}, TrainerHooks hooks = {});
  ~Trainer();

  void run();                        // the whole loop, to the plan's end or opt.stop_step
  StepRecord train_step();           // one optimizer step (enters a new phase when due)
  EvalRecord evaluate();             // validation loss over the configured windows
  std::string save_checkpoint();     // returns the checkpoint directory
  void load_checkpoint(const std::string& path);

  int64_t step() const { return step_; }
  uint64_t tokens() const { return tokens_; }
  int64_t stop_step() const;
  const RunConfig& config() const { return cfg_; }
  const TrainPlan& plan() const { return plan_; }
  Model<float>& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  RouterBalancer& balancer() { return *balancer_; }
  DataLoader& loader() { return *loader_; }
  int64_t skipped_steps() const { return skipped_; }

 private:
  void enter_phase(int phase);
  void log_progress(const StepRecord& r);
  void write_metrics(const nlohmann::json& j);
  void trim_metrics_after(int64_t step);
  nlohmann::json step_json(const StepRecord& r) const;

  RunConfig cfg_;
  TrainerOptions options_;
  TrainerHooks hooks_;
  TrainPlan plan_;
  std::unique_ptr<Model<float>> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<RouterBalancer> balancer_;
  std::unique_ptr<DataLoader> loader_;
  std::vector<TokenStream> val_;  // one per source with validation shards
  std::vector<std::string> val_names_;

  int64_t step_ = 0;
  uint64_t tokens_ = 0;
  int phase_ = -1;
  int64_t skipped_ = 0;
  int64_t last_saved_ = -1;
  double ema_tps_ = 0;  // smoothed tokens/s for the ETA

  std::vector<int32_t> batch_;              // this rank's rows of the global batch, [B, T+1]
  std::vector<int32_t> inputs_, targets_;   // one micro-batch, [mb, T]
  std::FILE* metrics_ = nullptr;
};

}  // namespace zaya
