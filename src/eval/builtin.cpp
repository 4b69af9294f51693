// The standard tasks as lm-evaluation-harness defines them (its task YAMLs and utils.py),
// over the files users download: DIR/<task>/<split>.jsonl, MMLU's CSVs.
#include <algorithm>
#include <filesystem>
#include <regex>

#include "core/error.h"
#include "eval/task.h"

namespace zaya::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// lm-eval hellaswag/utils.py preprocess.
std::string hellaswag_preprocess(std::string text) {
  const size_t a = text.find_first_not_of(" \t\n\r\f\v");
  text = a == std::string::npos ? "" : text.substr(a, text.find_last_not_of(" \t\n\r\f\v") - a + 1);
  for (size_t p; (p = text.find(" [title]")) != std::string::npos;) text.replace(p, 8, ". ");
  text = std::regex_replace(text, std::regex("\\[.*?\\]"), "");
  for (size_t p = 0; (p = text.find("  ", p)) != std::string::npos; ++p) text.replace(p, 2, " ");  // one pass
  return text;
}

// Python's str.capitalize (ASCII): first character upper, the rest lower.
std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = char(i == 0 ? std::toupper(static_cast<unsigned char>(s[i])) : std::tolower(static_cast<unsigned char>(s[i])));
  return s;
}

int int_field(const Doc& d, const std::string& f) {
  const json& v = doc_field(d, f);
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), ::isdigit)) return std::stoi(s);
  }
  fail(d.where, ": field '", f, "': ", v.dump(), " is not an integer");
}

std::vector<std::string> string_list(const Doc& d, const std::string& f) {
  const json& v = doc_field(d, f);
  if (!v.is_array()) fail(d.where, ": field '", f, "' is not a list");
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) fail(d.where, ": field '", f, "': ", e.dump(), " is not a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<Doc> split_file(const std::string& dir, const std::string& name, const std::string& split, bool required) {
  const std::string p = (fs::path(dir) / name / (split + ".jsonl")).string();
  if (!fs::exists(p)) {
    if (required) fail(p, ": no such file (", name, " reads DIR/", name, "/", split, ".jsonl; see docs/eval.md)");
    return {};
  }
  std::vector<Doc> docs = read_jsonl(p);
  if (docs.empty() && required) fail(p, ": empty split");
  return docs;
}

Task base(const std::string& name, const std::string& dir, OutputType type, const std::string& test,
          const std::string& fewshot) {
  Task t;
  t.name = name;
  t.source = (fs::path(dir) / name).string();
  t.type = type;
  t.test_split = test;
  t.splits[test] = split_file(dir, name, test, true);
  if (!fewshot.empty()) {
    std::vector<Doc> f = split_file(dir, name, fewshot, false);
    if (!f.empty()) {
      t.splits[fewshot] = std::move(f);
      t.fewshot_split = fewshot;
    }
  }
  t.metrics = known_metrics(type);
  return t;
}

Task hellaswag(const std::string& dir) {
  Task t = base("hellaswag", dir, OutputType::MultipleChoice, "validation", "train");
  t.fewshot_draw_extra = true;  // lm-eval's yaml: test_split null, no fewshot_split
  t.doc_to_text = [](const Doc& d) {
    const std::string ctx = doc_string(d, "ctx_a") + " " + capitalize(doc_string(d, "ctx_b"));
    return hellaswag_preprocess(doc_string(d, "activity_label") + ": " + ctx);
  };
  t.doc_to_choice = [](const Doc& d) {
    std::vector<std::string> c = string_list(d, "endings");
    for (std::string& e : c) e = hellaswag_preprocess(e);
    return c;
  };
  t.doc_to_gold = [](const Doc& d) { return int_field(d, "label"); };
  return t;
}

Task arc(const std::string& name, const std::string& dir) {
  Task t = base(name, dir, OutputType::MultipleChoice, "test", "train");
  t.doc_to_text = [](const Doc& d) { return "Question: " + doc_string(d, "question") + "\nAnswer:"; };
  t.doc_to_choice = [](const Doc& d) { return string_list(d, "choices.text"); };
  t.doc_to_gold = [](const Doc& d) {  // choices.label.index(answerKey)
    const std::vector<std::string> labels = string_list(d, "choices.label");
    const std::string key = doc_string(d, "answerKey");
    auto it = std::find(labels.begin(), labels.end(), key);
    if (it == labels.end()) fail(d.where, ": field 'answerKey': '", key, "' is not among choices.label");
    return int(it - labels.begin());
  };
  return t;
}

Task piqa(const std::string& dir) {
  Task t = base("piqa", dir, OutputType::MultipleChoice, "validation", "train");
  t.fewshot_draw_extra = true;  // lm-eval's yaml: test_split null, no fewshot_split
  t.doc_to_text = [](const Doc& d) { return "Question: " + doc_string(d, "goal") + "\nAnswer:"; };
  t.doc_to_choice = [](const Doc& d) { return std::vector<std::string>{doc_string(d, "sol1"), doc_string(d, "sol2")}; };
  t.doc_to_gold = [](const Doc& d) { return int_field(d, "label"); };
  return t;
}

size_t blank(const Doc& d) {
  const std::string s = doc_string(d, "sentence");
  const size_t i = s.find('_');
  if (i == std::string::npos) fail(d.where, ": field 'sentence' has no '_' blank");
  return i;
}

Task winogrande(const std::string& dir) {
  Task t = base("winogrande", dir, OutputType::MultipleChoice, "validation", "train");
  t.fewshot_draw_extra = true;  // lm-eval's yaml: no test_split, no fewshot_split
  t.metrics = {"acc"};
  t.partial = true;
  t.doc_to_text = [](const Doc&) { return std::string(); };  // unused: the options are the contexts
  t.doc_to_choice = [](const Doc& d) {
    const std::string s = doc_string(d, "sentence");
    const size_t i = blank(d);
    return std::vector<std::string>{s.substr(0, i) + doc_string(d, "option1"), s.substr(0, i) + doc_string(d, "option2")};
  };
  t.doc_to_target = [](const Doc& d) {  // sentence[idx + 1:].strip()
    std::string s = doc_string(d, "sentence").substr(blank(d) + 1);
    const size_t a = s.find_first_not_of(" \t\n\r\f\v");
    return a == std::string::npos ? std::string() : s.substr(a, s.find_last_not_of(" \t\n\r\f\v") - a + 1);
  };
  t.doc_to_gold = [](const Doc& d) {
    const std::string a = doc_string(d, "answer");
    if (a != "1" && a != "2") fail(d.where, ": field 'answer': '", a, "' is not \"1\" or \"2\"");
    return a == "1" ? 0 : 1;
  };
  return t;
}

Task lambada(const std::string& dir) {
  Task t = base("lambada", dir, OutputType::Loglikelihood, "test", "");
  auto split_last = [](const Doc& d) {
    const std::string s = doc_string(d, "text");
    const size_t i = s.rfind(' ');
    if (i == std::string::npos) fail(d.where, ": field 'text' has a single word");
    return i;
  };
  t.doc_to_text = [split_last](const Doc& d) { return doc_string(d, "text").substr(0, split_last(d)); };
  t.doc_to_target = [split_last](const Doc& d) { return doc_string(d, "text").substr(split_last(d)); };  // ' ' + word
  return t;
}

std::vector<Task> mmlu(const std::string& dir) {
  const fs::path root = fs::path(dir) / "mmlu";
  const fs::path test_dir = root / "test", dev_dir = root / "dev";
  if (!fs::is_directory(test_dir)) fail(test_dir.string(), ": no such directory (mmlu reads DIR/mmlu/{dev,test}/<subject>_{dev,test}.csv)");
  std::vector<std::string> subjects;
  for (const auto& e : fs::directory_iterator(test_dir)) {
    const std::string f = e.path().filename().string();
    if (f.size() > 9 && f.ends_with("_test.csv")) subjects.push_back(f.substr(0, f.size() - 9));
  }
  std::sort(subjects.begin(), subjects.end());
  if (subjects.empty()) fail(test_dir.string(), ": no <subject>_test.csv files");
  const std::vector<std::string> cols{"question", "A", "B", "C", "D", "answer"};
  std::vector<Task> out;
  for (const std::string& s : subjects) {
    Task t;
    t.name = "mmlu_" + s;
    t.source = (test_dir / (s + "_test.csv")).string();
    t.type = OutputType::MultipleChoice;
    t.metrics = {"acc"};
    t.test_split = "test";
    t.splits["test"] = read_csv(t.source, cols);
    if (t.splits["test"].empty()) fail(t.source, ": empty split");
    const fs::path dev = dev_dir / (s + "_dev.csv");
    if (fs::exists(dev)) {
      t.splits["dev"] = read_csv(dev.string(), cols);
      t.fewshot_split = "dev";
    }
    t.num_fewshot = 0;  // lm-eval's default; the leaderboard's 5-shot is --num-fewshot 5
    t.fewshot_first_n = true;
    std::string subject = s;
    std::replace(subject.begin(), subject.end(), '_', ' ');
    t.description = "The following are multiple choice questions (with answers) about " + subject + ".\n\n";
    t.doc_to_text = [](const Doc& d) {
      std::string q = doc_string(d, "question");
      const size_t a = q.find_first_not_of(" \t\n\r\f\v");
      q = a == std::string::npos ? "" : q.substr(a, q.find_last_not_of(" \t\n\r\f\v") - a + 1);
      return q + "\nA. " + doc_string(d, "A") + "\nB. " + doc_string(d, "B") + "\nC. " + doc_string(d, "C") +
             "\nD. " + doc_string(d, "D") + "\nAnswer:";
    };
    t.doc_to_choice = [](const Doc&) { return std::vector<std::string>{"A", "B", "C", "D"}; };
    t.doc_to_gold = [](const Doc& d) {
      const std::string a = doc_string(d, "answer");
      if (a.size() != 1 || a[0] < 'A' || a[0] > 'D') fail(d.where, ": field 'answer': '", a, "' is not A, B, C or D");
      return a[0] - 'A';
    };
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

bool is_builtin_task(const std::string& n) {
  return n == "hellaswag" || n == "arc_easy" || n == "arc_challenge" || n == "piqa" || n == "winogrande" ||
         n == "lambada" || n == "mmlu";
}

std::vector<Task> load_builtin_task(const std::string& n, const std::string& dir) {
  if (n == "hellaswag") return {hellaswag(dir)};
  if (n == "arc_easy" || n == "arc_challenge") return {arc(n, dir)};
  if (n == "piqa") return {piqa(dir)};
  if (n == "winogrande") return {winogrande(dir)};
  if (n == "lambada") return {lambada(dir)};
  if (n == "mmlu") return mmlu(dir);
  fail("unknown task '", n, "'");
}

}  // namespace zaya::eval
