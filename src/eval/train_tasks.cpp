#include "eval/train_tasks.h"

#include <omp.h>

#include <cstdio>
#include <filesystem>

#include "ckpt/tokenizer_files.h"
#include "core/error.h"
#include "core/log.h"
#include "eval/runner.h"
#include "model/infer.h"
#include "model/weights.h"

namespace zaya::eval {

namespace fs = std::filesystem;

TrainTasks::TrainTasks(const RunConfig& cfg) : interval_(cfg.eval_tasks_interval), limit_(cfg.eval_tasks_limit) {
  if (cfg.eval_tasks.empty()) return;
  std::vector<std::string> names, files;
  for (const std::string& t : cfg.eval_tasks) (t.ends_with(".json") ? files : names).push_back(t);
  tasks_ = resolve_tasks(names, cfg.eval_data_dir, files);
  // [data] tokenizer (by default the first source directory's), else any source directory's:
  // sources given as Megatron prefixes or shard lists have none of their own.
  std::error_code ec;
  if (!cfg.tokenizer.empty() && fs::is_regular_file(cfg.tokenizer, ec)) tokenizer_ = cfg.tokenizer;
  for (const RunSource& s : cfg.sources)
    if (tokenizer_.empty() && !s.dir.empty()) tokenizer_ = find_model_tokenizer(s.dir);
  if (tokenizer_.empty())
    fail("[eval] tasks need the data's tokenizer: set [data] tokenizer, or give a source dir holding tokenizer.model or tokenizer.json");
  metrics_path_ = (fs::path(cfg.out_dir) / "metrics.jsonl").string();
}

std::optional<std::vector<TaskResult>> TrainTasks::run(Trainer& tr, int64_t step) {
  if (tasks_.empty() || !tr.is_root()) return std::nullopt;
  if (interval_ > 0 && step % interval_ != 0 && step != tr.stop_step()) return std::nullopt;
  Model<float>& m = tr.model();
  if (m.layout.experts.count() != m.cfg().num_experts) {
    log_warn("[eval] tasks skipped: this rank holds ", m.layout.experts.count(), " of ", m.cfg().num_experts,
             " experts (expert parallelism); run zaya eval on the checkpoint");
    return std::nullopt;
  }
  auto tok = load_tokenizer(tokenizer_);
  InferModel im(m.cfg(), WeightStore::from_model(m));
  RunOptions o;
  o.limit = limit_;
  // A small model's products are too small to share between threads: its decode steps
  // would be all barriers.
  const int threads = omp_get_max_threads();
  if (m.params.size() < 50'000'000) omp_set_num_threads(1);
  std::vector<TaskResult> res;
  try {
    res = run_tasks(im, *tok, tasks_, o);
  } catch (...) {
    omp_set_num_threads(threads);
    throw;
  }
  omp_set_num_threads(threads);
  nlohmann::json j = {{"type", "eval_tasks"}, {"step", step}, {"tokens_trained", tr.tokens()}};
  for (const TaskResult& r : res) {
    nlohmann::json t = {{"n", r.n}};
    for (const Metric& x : r.metrics) {
      t[x.name] = x.value;
      t[x.name + "_stderr"] = std::isnan(x.stderr_) ? nlohmann::json(nullptr) : nlohmann::json(x.stderr_);
    }
    j["tasks"][r.name] = t;
  }
  // Appended as one write: the trainer's own records go to the same file (O_APPEND).
  if (FILE* f = std::fopen(metrics_path_.c_str(), "a")) {
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
  return res;
}

void install_train_tasks(const RunConfig& cfg, TrainerHooks& hooks, std::shared_ptr<Trainer*> trainer,
                         TrainTasksReport report) {
  auto tasks = std::make_shared<TrainTasks>(cfg);
  if (tasks->empty()) return;
  auto prev = hooks.on_eval;
  hooks.on_eval = [prev, tasks, trainer, report](const EvalRecord& e) {
    if (prev) prev(e);
    if (!*trainer) return;
    std::optional<std::vector<TaskResult>> res = tasks->run(**trainer, e.step);
    if (res && report) report(e.step, *res);
  };
}

}  // namespace zaya::eval
