// The training loop: plan -> (phase switch) -> batch -> micro-batches forward/backward ->
// global gradient norm, clipping -> optimizer step -> router balancing -> metrics, reports,
// periodic validation and checkpoints. run() reads top to bottom; each stage is one
// member function below it. The trainer prints nothing: it hands records to its hooks
// (TrainerReports) and `zaya train` prints them (src/cli/train_progress.cpp).
//
// Distributed: the same code runs a world of one (plain `zaya train`, no MPI calls) or
// `mpirun -np N zaya train` with world = DP x EP x CP (comm/comm.h). Every data rank
// (dp, ep) takes its rows of the same global batch (the loader's global-sample addressing);
// the last micro-batch's backward hands finished gradient buckets to ZeRO-1's non-blocking
// reduce-scatter (parallel/zero1.h); loss sums, router counts and the step verdict are reduced
// over the world, so every rank updates identically. Expert parallel swaps the model's
// ExpertCompute for parallel::EpExperts. Checkpoints: each rank writes its own slices of the
// global tensors (params and optimizer state of its ZeRO-1 shard, its experts), rank 0
// writes the one manifest (trainer_ckpt.cpp). A checkpoint loads under any layout.
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
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "train/balancer.h"
#include "data/loader.h"
#include "train/optim.h"
#include "train/run_config.h"
#include "train/schedule.h"
#include "train/tensorboard.h"
#include "parallel/zero1.h"
#include "comm/comm.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"

namespace zaya {

struct StepRecord {
  int64_t step = 0;  // steps completed, this one included
  int phase = 0;
  int global_batch = 0, seq_len = 0;
  double loss = 0, aux_loss = 0, lr = 0, grad_norm = 0;
  bool clipped = false, skipped = false;  // skipped: non-finite loss or gradient norm, no update
  uint64_t tokens = 0;                    // tokens trained, this step included
  double seconds = 0, tokens_per_second = 0;
  double comm_seconds = 0;   // blocked in communication (exposed gradient reduction, gathers, EP all-to-all)
  bool data_skipped = false; // a skip window: batch drawn, nothing trained
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
  bool metrics = true;      // out_dir/metrics.jsonl
  bool save_final = true;   // checkpoint when the loop ends
  // Weights (and balancing biases) from a zaya checkpoint or an HF directory; fresh optimizer,
  // balancer and loader state. Ignored when --resume finds a checkpoint of the run itself.
  std::string init_from;
  // Data windows to skip: steps s with first <= s <= last (1-based) draw their batch and
  // advance the schedule but train nothing (a supervisor's answer to repeated anomalies).
  std::vector<std::pair<int64_t, int64_t>> skip_steps;
  // Parallel layout: ep, cp (0 = the run config's [parallel]); dp = world / (ep * cp).
  int ep = 0, cp = 0;
};

// What the trainer reports for a front end to show (TrainerHooks::report): called on world
// rank 0 only; every one is optional.
struct StartRecord {  // where the weights came from (reported by the constructor)
  enum class Kind {
    FreshStart,  // --resume found no checkpoint: training starts from scratch
    Resumed,     // from the run's own checkpoint
    InitFrom,    // weights from --init-from; optimizer, balancer and loader start fresh
  };
  Kind kind = Kind::FreshStart;
  // FreshStart: the checkpoint directory searched; Resumed: the checkpoint; InitFrom: the path given.
  std::string from;
  int64_t step = 0;     // Resumed: the step resumed at
  uint64_t tokens = 0;  // Resumed: tokens trained by then
  int saved_dp = 1, saved_ep = 1, saved_cp = 1;  // Resumed: the layout the checkpoint was written under
  comm::Layout layout;                            // Resumed: this run's layout
  bool with_biases = false;                       // InitFrom: a zaya checkpoint (balancing biases too)
};

struct RunStartRecord {  // run() begins
  std::string name;
  int64_t total_steps = 0, stop_step = 0, from_step = 0;
  uint64_t total_tokens = 0;
  int num_phases = 0;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  bool bf16 = false;
  size_t params = 0;  // parameters this rank holds (its own experts only under expert parallel)
  int world = 1;
  comm::Layout layout;
  bool zero1 = false;
};

struct PhaseRecord {  // a phase is entered
  int phase = 0;        // 0-based
  bool first = false;   // the first phase this process enters (the start of a run or a resume)
  std::string name;
  int64_t from_step = 0;  // steps completed before it
  int seq_len = 0, global_batch = 0;
  double rope_theta = 0;
};

struct CheckpointRecord {  // a checkpoint is complete on every rank
  int64_t step = 0;
  std::string dir;
  double stall_s = 0;  // what training waited for
  double write_s = 0;  // the writer's own time
  bool async = false;  // written in the background
};

struct TrainerReports {
  std::function<void(const StartRecord&)> start;
  std::function<void(const RunStartRecord&)> run_start;
  std::function<void(const PhaseRecord&)> phase;
  std::function<void(const StepRecord&)> step;  // every step run() takes
  std::function<void(const EvalRecord&)> eval;  // every validation, before TrainerHooks::on_eval
  std::function<void(const CheckpointRecord&)> checkpoint;
};

// Points where outside code watches or steers the loop (src/ft/ hangs the supervisor's
// heartbeats, anomaly detection and fault injection here; the trainer knows nothing of them).
// Every hook is optional and called on every rank (the reports: rank 0 only).
enum class StepVerdict { Update = 0, Skip = 1, Abort = 2 };  // ordered: ranks agree on the max

struct StepCheck {
  int64_t step = 0;        // the step being taken (1-based: steps completed after it)
  double loss = 0;         // global-batch mean loss (identical on every rank)
  double grad_norm = 0;    // global gradient norm before clipping (identical on every rank)
  bool finite = true;      // loss and grad_norm are both finite
  // A MoE layer whose routing stayed unhealthy for [anomaly] router_steps steps, reached at
  // this step (train/router_health.h); with router.rollback the step aborts for a rollback.
  std::optional<RouterAlarm> router;
};

struct TrainerHooks {
  // Per-rank heartbeat: stage is "start", "step", "eval", "checkpoint" (before the save),
  // "checkpoint_done" or "done"; step = steps completed; step_seconds for "step".
  std::function<void(const char* stage, int64_t step, double step_seconds)> heartbeat;
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const EvalRecord&)> on_eval;
  // Called before step `step` (1-based) draws its batch: fault injection (kill, hang, slow).
  std::function<void(int64_t step)> before_step;
  // Called after backward, before the gradient reduction: fault injection into this rank's
  // gradients (e.g. NaN). grads: this rank's flat gradient buffer of n elements.
  std::function<void(int64_t step, float* grads, size_t n)> after_backward;
  // Decides whether the step updates the weights. Without it: Skip when !finite, else
  // Update. The verdicts of all ranks are reduced (max) so every rank does the same;
  // Abort throws AnomalyAbort after the step is recorded (nothing updated).
  std::function<StepVerdict(const StepCheck&)> judge;
  // Called on every rank after a checkpoint is complete (dir = the final step directory).
  std::function<void(int64_t step, const std::string& dir)> after_checkpoint;
  TrainerReports report;  // world rank 0 only
};

// Thrown by the loop when a judge returns Abort (e.g. K consecutive anomalies); the CLI
// exits with kExitAnomalies so a supervisor can roll back and skip the data window.
struct AnomalyAbort : Error {
  int64_t step;
  AnomalyAbort(const std::string& what, int64_t s) : Error(what), step(s) {}
};
constexpr int kExitAnomalies = 17;

class Trainer {
 public:
  Trainer(RunConfig cfg, TrainerOptions opt = {}, TrainerHooks hooks = {});
  ~Trainer();

  void run();                        // the whole loop, to the plan's end or opt.stop_step
  StepRecord train_step();           // one optimizer step (enters a new phase when due)
  EvalRecord evaluate();             // validation loss over the configured windows
  std::string save_checkpoint();     // synchronous; returns the checkpoint directory
  void load_checkpoint(const std::string& path);

  int64_t step() const { return step_; }
  uint64_t tokens() const { return tokens_; }
  int64_t stop_step() const;
  const RunConfig& config() const { return cfg_; }
  const TrainPlan& plan() const { return plan_; }
  // The model with plain fp32 weights (bf16 runs keep them split between steps: Model::
  // use_split_master; the next step splits them again).
  Model<float>& model() {
    model_->plain_master();
    return *model_;
  }
  Optimizer& optimizer() { return *optimizer_; }
  parallel::Zero1& zero1() { return *zero1_; }
  const comm::Groups& groups() const { return groups_; }
  bool is_root() const { return root_; }
  RouterBalancer& balancer() { return *balancer_; }
  DataLoader& loader() { return *loader_; }
  int64_t skipped_steps() const { return skipped_; }

 private:
  void enter_phase(int phase);
  void begin_save(bool async);
  bool finish_save(bool wait, bool throw_on_failure = false);
  void init_weights_from(const std::string& path);
  bool in_skip_window(int64_t step) const;
  StepVerdict agree(StepVerdict v);
  void write_metrics(const nlohmann::json& j);
  std::optional<RouterAlarm> judge_routing(int64_t step);
  void trim_metrics_after(int64_t step);
  nlohmann::json step_json(const StepRecord& r) const;

  RunConfig cfg_;
  TrainerOptions options_;
  TrainerHooks hooks_;
  TrainPlan plan_;
  comm::Groups groups_;  // world = DP x EP x CP and this rank's groups
  bool root_ = true;     // world rank 0: reports, metrics, manifest
  std::unique_ptr<Model<float>> model_;
  parallel::EpExperts<float>* ep_experts_ = nullptr;  // owned by the model (expert parallel only)
  parallel::CpShard<float>* cp_shard_ = nullptr;      // owned by the model (context parallel only)
  std::unique_ptr<parallel::Zero1> zero1_;            // gradient reduction, parameter all-gather
  std::unique_ptr<Optimizer> optimizer_;              // steps zero1_->owned() (all of it without ZeRO-1)
  std::unique_ptr<RouterBalancer> balancer_;
  RouterHealthMonitor router_health_;
  std::unique_ptr<DataLoader> loader_;
  std::vector<TokenStream> val_;  // one per source with validation shards
  std::vector<std::string> val_names_;

  int64_t step_ = 0;
  uint64_t tokens_ = 0;
  int phase_ = -1;
  int64_t skipped_ = 0;
  int64_t last_saved_ = -1;
  struct PendingSave;
  struct PendingSaveDeleter {  // joins a writer still running (never leave one behind)
    void operator()(PendingSave* p) const;
  };
  std::unique_ptr<PendingSave, PendingSaveDeleter> pending_;  // a checkpoint being written

  std::vector<int32_t> batch_;              // this rank's rows of the global batch, [B, T+1]
  std::vector<int32_t> inputs_, targets_;   // one micro-batch, [mb, T]
  std::FILE* metrics_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tb_;  // [log] tensorboard
};

}  // namespace zaya
