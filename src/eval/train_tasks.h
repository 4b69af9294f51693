// [eval] tasks during training: the run's tasks are loaded before the first step (a bad task
// file fails at once), then run on the trainer's model at validation evals (every
// tasks_interval steps), on the root rank. Each run appends
//   {"type": "eval_tasks", "step": s, "tokens_trained": t, "tasks": {name: {metric: v, metric_stderr: se}}}
// to out_dir/metrics.jsonl (scripts/plot_metrics.py draws accuracy against step) and hands
// the results to the caller's report (zaya train prints the markdown table).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "eval/runner.h"
#include "eval/task.h"
#include "train/run_config.h"
#include "train/trainer.h"

namespace zaya::eval {

class TrainTasks {
 public:
  explicit TrainTasks(const RunConfig& cfg);
  bool empty() const { return tasks_.empty(); }
  // Called from the trainer's on_eval hook; the results when the tasks ran at this step.
  std::optional<std::vector<TaskResult>> run(Trainer& tr, int64_t step);

 private:
  std::vector<Task> tasks_;
  std::string tokenizer_, metrics_path_;
  int64_t interval_ = 0;
  int limit_ = 0;
};

// Chains a TrainTasks run onto hooks.on_eval; `trainer` is filled in once constructed.
// report(step, results) after each run of the tasks (root rank only).
using TrainTasksReport = std::function<void(int64_t step, const std::vector<TaskResult>& results)>;
void install_train_tasks(const RunConfig& cfg, TrainerHooks& hooks, std::shared_ptr<Trainer*> trainer,
                         TrainTasksReport report = nullptr);

}  // namespace zaya::eval
