// Tasks as lm-evaluation-harness defines them: documents from local data files (JSONL or
// CSV) in train/validation/test splits, turned into a context and the continuations a model
// scores, with the few-shot examples, delimiters and metrics of the task. Built-in loaders
// (builtin.cpp) reproduce lm-eval's standard tasks; task files (JSON, task_file.cpp) describe
// new ones with field names or {{field}} templates.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/metrics.h"

namespace zaya::eval {

struct Doc {
  nlohmann::json j;
  std::string where;  // "file:line" for error messages
};

enum class OutputType { MultipleChoice, Loglikelihood, Rolling, Generate };
const char* output_type_name(OutputType t);

// An output filter for generate_until (lm-eval's filter_list, one pipeline): a regex whose
// first group (or whole match) is kept ("[invalid]" when nothing matches), or the first line.
struct Filter {
  enum Kind { Regex, FirstLine, Strip } kind = Regex;
  std::string pattern;
  int group_select = 0;  // which match (lm-eval's group_select); negative counts from the end
};
std::string apply_filters(const std::vector<Filter>& f, const std::string& text);

struct Task {
  std::string name;
  std::string source;  // task file or data directory, for messages
  OutputType type = OutputType::MultipleChoice;
  std::map<std::string, std::vector<Doc>> splits;
  std::string test_split = "test", fewshot_split;  // fewshot_split empty: none
  std::string description;                          // before the few-shot examples
  std::string target_delimiter = " ", fewshot_delimiter = "\n\n";
  int num_fewshot = 0;
  bool fewshot_first_n = false;  // MMLU: the first k of the split, in order
  // lm-eval draws k + 1 examples and drops the document itself when its config's fewshot_split
  // equals its test_split, both unset included (hellaswag, piqa, winogrande); else k (arc).
  bool fewshot_draw_extra = false;
  std::vector<std::string> metrics;
  MatchOptions match;
  std::vector<std::string> until{"\n\n"};
  int max_gen_toks = 256;
  std::vector<Filter> filters;
  // Winogrande's partial scoring: the choices are contexts and the target is the shared
  // continuation after the blank.
  bool partial = false;

  std::function<std::string(const Doc&)> doc_to_text;
  std::function<std::vector<std::string>(const Doc&)> doc_to_choice;  // multiple choice
  std::function<int(const Doc&)> doc_to_gold;                          // multiple choice
  std::function<std::string(const Doc&)> doc_to_target;                // other types
  std::function<std::string(const Doc&)> doc_description;              // MMLU: per subject
};

// One document's requests as strings (tokenized by the runner).
struct Item {
  int doc_id = 0;
  const Doc* doc = nullptr;
  std::vector<std::string> contexts;       // one, or one per choice (partial scoring)
  std::vector<std::string> continuations;  // one per choice, or the target
  std::vector<std::string> choices;        // multiple choice (acc_norm lengths)
  std::vector<int> fewshot_ids;            // the examples' indices in the few-shot split, in order
  int gold = -1;
  std::string target;  // loglikelihood / generate_until: the reference text; rolling: the document
};

// Metrics each output type supports, the first ones being the defaults.
const std::vector<std::string>& known_metrics(OutputType t);

// The items of the test split (the first `limit` documents when limit > 0), with few-shot
// contexts drawn from the few-shot split as lm-eval's default sampler draws them: one
// random.Random(seed) per task (lm-eval: 1234), random.sample per document in order, the
// document itself (by value) removed, truncated to num_fewshot.
// Every document is checked first: choice lists of length >= 2, the gold index in range.
std::vector<Item> build_items(const Task& t, int limit, uint64_t seed);

// Data files. JSONL: one object per line (blank lines skipped). CSV: RFC 4180 with a header
// row of field names, or `columns` for header-less files (MMLU).
std::vector<Doc> read_jsonl(const std::string& path);
std::vector<Doc> read_csv(const std::string& path, const std::vector<std::string>& columns = {});
std::vector<Doc> read_data_file(const std::string& path);

// Doc field access: "a.b.0" paths; fails naming the doc's file:line and the field.
const nlohmann::json& doc_field(const Doc& d, const std::string& path);
std::string doc_string(const Doc& d, const std::string& path);
std::string json_to_text(const nlohmann::json& v);

// Built-in tasks: hellaswag, arc_easy, arc_challenge, piqa, winogrande, lambada, mmlu (all
// subjects, one Task each, "mmlu_<subject>"), reading DIR/<name>/<split>.jsonl.
bool is_builtin_task(const std::string& name);
std::vector<Task> load_builtin_task(const std::string& name, const std::string& data_dir);
// A JSON task file (docs/eval.md has its fields).
Task load_task_file(const std::string& path);

}  // namespace zaya::eval
