// Runs tasks on a model: tokenizes every request as lm-eval does (trailing spaces of the
// context move to the continuation), scores all of a task's requests with one
// Engine::score_many call (longest first, one prefill per context, continuation rows of
// several items per feed), and aggregates lm-eval's metrics and stderrs.
#pragma once
#include <cstdint>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/engine.h"
#include "eval/task.h"
#include "model/infer.h"
#include "data/tokenizer.h"

namespace zaya::eval {

// What a task has done so far: every few seconds (finished false), and once at its end.
struct RunProgress {
  std::string task;
  size_t done = 0, total = 0;
  const char* unit = "contexts";  // or "generations"
  double seconds = 0;
  bool finished = false;
  int documents = 0;       // at the end
  uint64_t requests = 0;   // at the end
};

struct RunOptions {
  int limit = 0;          // documents per task (0: all)
  int batch = 1;          // continuation rows fed together, across items
  int num_fewshot = -1;   // override every task's (-1: the task's own)
  uint64_t seed = 1234;   // few-shot sampling (lm-eval's default seed)
  // The library prints nothing: zaya eval prints these (none: quiet).
  std::function<void(const RunProgress&)> on_progress;
  std::ostream* samples = nullptr;  // --log-samples JSONL
};

struct Metric {
  std::string name;
  double value = 0, stderr_ = 0;  // stderr_ NaN: "N/A"
  bool higher_is_better = true;
};

struct TaskResult {
  std::string name;
  OutputType type = OutputType::MultipleChoice;
  int num_fewshot = 0, n = 0;
  std::vector<Metric> metrics;
  double seconds = 0;
  uint64_t requests = 0;  // (context, continuation) pairs or generations
  EngineStats stats;
  bool group = false;  // MMLU's aggregate over its subjects
};

// Scores one task.
TaskResult run_task(const InferModel& m, const Tokenizer& tok, const Task& t, const RunOptions& o);
// Every task in order; when MMLU subjects ran, their group row "mmlu" comes last.
std::vector<TaskResult> run_tasks(const InferModel& m, const Tokenizer& tok, std::vector<Task> tasks,
                                  const RunOptions& o);
// Built-in names (data in data_dir) and task files -> tasks; a name may be a task file's
// `task`, and task files not named run too.
std::vector<Task> resolve_tasks(const std::vector<std::string>& names, const std::string& data_dir,
                                const std::vector<std::string>& task_files);

// lm-eval's output: {"results": {task: {metric: v, metric_stderr: s}}, "n_samples": {task: n},
// "n-shot": {task: k}, "config": config}.
nlohmann::json results_json(const std::vector<TaskResult>& r, const nlohmann::json& config);
std::string markdown_table(const std::vector<TaskResult>& r);

// lm-eval's rolling windows (get_rolling_token_windows + make_disjoint_window with
// context_len 1): (context, continuation) pairs covering every token once.
std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> rolling_windows(const std::vector<int32_t>& tokens,
                                                                                   int32_t prefix_token, int max_len);
// lm-eval's _encode_pair with the tokenizer's document prefix before the context.
void encode_pair(const Tokenizer& tok, std::string ctx, std::string cont, std::vector<int32_t>& ctx_ids,
                 std::vector<int32_t>& cont_ids);

}  // namespace zaya::eval
