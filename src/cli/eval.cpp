// zaya eval (--model HFDIR | --ckpt RUN_OR_STEP) --tasks NAME[,NAME...] [--data-dir DIR]
//           [--task-file F.json] [--num-fewshot K] [--limit N] [--batch B]
//           [--output results.json] [--log-samples F.jsonl] [--seed S] [--fp32] [--tokenizer T]:
// downstream evaluation with lm-evaluation-harness's conventions (docs/eval.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/io.h"
#include "eval/engine.h"
#include "eval/runner.h"
#include "data/tokenizer.h"

namespace {

struct Opts {
  std::string model, ckpt, data_dir, output, log_samples, tokenizer;
  std::vector<std::string> tasks, task_files;
  int num_fewshot = -1, limit = 0, batch = 1;
  uint64_t seed = 1234;
  bool fp32 = false, quiet = false;
};

void write_out(const std::string& path, const std::string& s) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  zaya::write_file_atomic(path, s.data(), s.size());
}

void run(const Opts& o) {
  // Tasks first: a bad task file fails before a model is loaded.
  std::vector<zaya::eval::Task> tasks = zaya::eval::resolve_tasks(o.tasks, o.data_dir, o.task_files);
  zaya::eval::LoadedModel lm = zaya::eval::open_model(o.model, o.ckpt, o.fp32);
  const std::string tok_path = o.tokenizer.empty() ? lm.tokenizer : o.tokenizer;
  if (tok_path.empty()) zaya::fail(lm.name, ": no tokenizer.json or tokenizer.model there; pass --tokenizer");
  auto tok = zaya::load_tokenizer(tok_path);
  if (tok->vocab_size() > lm.cfg.vocab_size)
    zaya::fail("tokenizer ", tok_path, " has ", tok->vocab_size(), " ids; the model only ", lm.cfg.vocab_size);
  zaya::eval::RunOptions ro;
  ro.limit = o.limit;
  ro.batch = o.batch;
  ro.num_fewshot = o.num_fewshot;
  ro.seed = o.seed;
  if (!o.quiet)
    ro.on_progress = [](const zaya::eval::RunProgress& p) {
      if (p.finished)
        std::fprintf(stderr, "[eval] %s: %d documents, %llu requests in %.1f s (%.1f requests/s)\n", p.task.c_str(),
                     p.documents, (unsigned long long)p.requests, p.seconds,
                     double(p.requests) / std::max(p.seconds, 1e-9));
      else
        std::fprintf(stderr, "[eval] %s: %zu/%zu %s, %.1f s\n", p.task.c_str(), p.done, p.total, p.unit, p.seconds);
    };
  std::ostringstream samples;
  if (!o.log_samples.empty()) ro.samples = &samples;
  const std::vector<zaya::eval::TaskResult> res = zaya::eval::run_tasks(*lm.im, *tok, std::move(tasks), ro);
  nlohmann::json names = nlohmann::json::array();
  for (const auto& r : res) names.push_back(r.name);
  const nlohmann::json config = {
      {"model", lm.name},   {"model_type", o.ckpt.empty() ? "hf" : "zaya_checkpoint"},
      {"weights", lm.fp32 ? "fp32" : "stored"}, {"tokenizer", tok_path},
      {"tasks", names},     {"num_fewshot", o.num_fewshot < 0 ? nlohmann::json(nullptr) : nlohmann::json(o.num_fewshot)},
      {"limit", o.limit > 0 ? nlohmann::json(o.limit) : nlohmann::json(nullptr)},
      {"batch_size", o.batch}, {"seed", o.seed}, {"data_dir", o.data_dir}};
  const nlohmann::json out = zaya::eval::results_json(res, config);
  if (!o.output.empty()) {
    write_out(o.output, out.dump(2) + "\n");
  }
  if (!o.log_samples.empty()) {
    write_out(o.log_samples, samples.str());
  }
  std::printf("%s (%s), batch %d\n", lm.name.c_str(), lm.fp32 ? "fp32" : "weights as stored", o.batch);
  std::printf("%s", zaya::eval::markdown_table(res).c_str());
}

}  // namespace

ZAYA_COMMAND("eval", "Downstream evaluation as lm-evaluation-harness does it (tasks, acc / acc_norm, stderr)", [](CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--model", o->model, "HF-format model directory (bf16 weights used in place)");
  app.add_option("--ckpt", o->ckpt, "zaya checkpoint (a step directory, its root, its `latest` file or a run directory)");
  app.add_option("--tasks", o->tasks,
                 "hellaswag, arc_easy, arc_challenge, piqa, winogrande, lambada, mmlu, or a --task-file's name")
      ->delimiter(',');
  app.add_option("--data-dir", o->data_dir, "directory of the built-in tasks' data: DIR/<task>/<split>.jsonl, DIR/mmlu/");
  app.add_option("--task-file", o->task_files, "a JSON task file (repeatable; docs/eval.md)");
  app.add_option("--num-fewshot", o->num_fewshot, "few-shot examples per document (default: each task's)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--limit", o->limit, "score the first N documents of each task")->check(CLI::PositiveNumber);
  app.add_option("--batch", o->batch, "continuation rows fed together, across items, each after its own context (default 1: the numbers of zaya score to the bit)")
      ->check(CLI::Range(1, 256));
  app.add_option("--output", o->output, "results JSON (lm-eval's keys)");
  app.add_option("--log-samples", o->log_samples, "JSONL: every document, its requests and their log-probs");
  app.add_option("--seed", o->seed, "few-shot sampling seed (default 1234)");
  app.add_option("--tokenizer", o->tokenizer, "tokenizer.json or SentencePiece .model (default: the model's)");
  app.add_flag("--fp32", o->fp32, "HF dir with bf16 weights: load an fp32 copy (default: use them in place)");
  app.add_flag("--quiet", o->quiet, "no progress lines on stderr");
  app.callback([o] { run(*o); });
});
