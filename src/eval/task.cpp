#include "eval/task.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "eval/py_random.h"

namespace zaya::eval {

namespace fs = std::filesystem;
using nlohmann::json;

const char* output_type_name(OutputType t) {
  switch (t) {
    case OutputType::MultipleChoice: return "multiple_choice";
    case OutputType::Loglikelihood: return "loglikelihood";
    case OutputType::Rolling: return "loglikelihood_rolling";
    case OutputType::Generate: return "generate_until";
  }
  return "?";
}

const std::vector<std::string>& known_metrics(OutputType t) {
  static const std::vector<std::string> mc{"acc", "acc_norm"}, ll{"perplexity", "acc"},
      roll{"word_perplexity", "byte_perplexity", "bits_per_byte"}, gen{"exact_match"};
  switch (t) {
    case OutputType::MultipleChoice: return mc;
    case OutputType::Loglikelihood: return ll;
    case OutputType::Rolling: return roll;
    case OutputType::Generate: return gen;
  }
  return mc;
}

std::string apply_filters(const std::vector<Filter>& fs_, const std::string& text) {
  std::string s = text;
  for (const Filter& f : fs_) {
    if (f.kind == Filter::Strip) {
      const size_t a = s.find_first_not_of(" \t\n\r\f\v");
      s = a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\n\r\f\v") - a + 1);
    } else if (f.kind == Filter::FirstLine) {
      s = s.substr(0, s.find('\n'));
    } else {
      const std::regex re(f.pattern);
      std::vector<std::string> found;
      for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
        found.push_back((*it).size() > 1 ? (*it)[1].str() : (*it)[0].str());
      const int k = f.group_select < 0 ? int(found.size()) + f.group_select : f.group_select;
      s = (k >= 0 && k < int(found.size())) ? found[size_t(k)] : "[invalid]";
    }
  }
  return s;
}

// ---------------------------------------------------------------- data files

std::vector<Doc> read_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open");
  std::vector<Doc> docs;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) fail(path, ":", n, ": not a JSON line");
    if (!j.is_object()) fail(path, ":", n, ": a JSON object per line expected");
    docs.push_back({std::move(j), path + ":" + std::to_string(n)});
  }
  return docs;
}

std::vector<Doc> read_csv(const std::string& path, const std::vector<std::string>& columns) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  // RFC 4180: quoted fields may hold commas, doubled quotes and newlines.
  std::vector<std::vector<std::string>> rows;
  std::vector<int> row_line;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, start_line = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
        row_line.push_back(start_line);
      }
      row.clear();
      field.clear();
      any = false;
      start_line = ++line;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) fail(path, ":", start_line, ": unterminated quoted field");
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
    row_line.push_back(start_line);
  }
  std::vector<std::string> names = columns;
  size_t first = 0;
  if (names.empty()) {
    if (rows.empty()) return {};
    names = rows[0];
    first = 1;
  }
  std::vector<Doc> docs;
  for (size_t r = first; r < rows.size(); ++r) {
    if (rows[r].size() != names.size())
      fail(path, ":", row_line[r], ": ", rows[r].size(), " fields, expected ", names.size());
    json j = json::object();
    for (size_t c = 0; c < names.size(); ++c) j[names[c]] = rows[r][c];
    docs.push_back({std::move(j), path + ":" + std::to_string(row_line[r])});
  }
  return docs;
}

std::vector<Doc> read_data_file(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".jsonl" || ext == ".json") return read_jsonl(path);
  if (ext == ".csv") return read_csv(path);
  fail(path, ": data files are .jsonl or .csv");
}

// ---------------------------------------------------------------- fields

const json& doc_field(const Doc& d, const std::string& path) {
  const json* v = &d.j;
  size_t a = 0;
  while (a <= path.size()) {
    const size_t b = std::min(path.find('.', a), path.size());
    const std::string key = path.substr(a, b - a);
    if (v->is_object()) {
      auto it = v->find(key);
      if (it == v->end()) fail(d.where, ": field '", path, "' is missing");
      v = &*it;
    } else if (v->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit)) {
      const size_t i = std::stoul(key);
      if (i >= v->size()) fail(d.where, ": field '", path, "': index ", i, " past the end (", v->size(), ")");
      v = &(*v)[i];
    } else {
      fail(d.where, ": field '", path, "' is missing");
    }
    a = b + 1;
  }
  return *v;
}

std::string json_to_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

std::string doc_string(const Doc& d, const std::string& path) {
  const json& v = doc_field(d, path);
  if (!v.is_string() && !v.is_number()) fail(d.where, ": field '", path, "' is not a string");
  return json_to_text(v);
}

// ---------------------------------------------------------------- items

namespace {

int check_choices(const Task& t, const Doc& d, const std::vector<std::string>& choices) {
  if (choices.size() < 2) fail(d.where, ": field 'doc_to_choice': ", choices.size(), " choice(s); at least 2 needed");
  const int g = t.doc_to_gold(d);
  if (g < 0 || g >= int(choices.size()))
    fail(d.where, ": field 'doc_to_target': gold index ", g, " is out of range for ", choices.size(), " choices");
  return g;
}

std::string target_text(const Task& t, const Doc& d) {
  if (t.type == OutputType::MultipleChoice) {
    const std::vector<std::string> c = t.doc_to_choice(d);
    const int g = check_choices(t, d, c);
    if (t.partial) return c[size_t(g)] + t.target_delimiter + t.doc_to_target(d);  // lm-eval: context + target
    return c[size_t(g)];
  }
  return t.doc_to_target(d);
}

}  // namespace

std::vector<Item> build_items(const Task& t, int limit, uint64_t seed) {
  auto it = t.splits.find(t.test_split);
  if (it == t.splits.end()) fail(t.source, ": field 'test_split': no split '", t.test_split, "'");
  const std::vector<Doc>& docs = it->second;
  if (docs.empty()) fail(t.source, ": field 'test_split': split '", t.test_split, "' is empty");
  const std::vector<Doc>* shots = nullptr;
  const size_t draw = size_t(t.num_fewshot) + (t.fewshot_draw_extra ? 1 : 0);
  if (t.num_fewshot > 0) {
    if (t.fewshot_split.empty()) fail(t.source, ": field 'num_fewshot': ", t.num_fewshot, " shots but no fewshot_split");
    auto f = t.splits.find(t.fewshot_split);
    if (f == t.splits.end()) fail(t.source, ": field 'fewshot_split': no split '", t.fewshot_split, "'");
    shots = &f->second;
    if (shots->size() < draw)
      fail(t.source, ": field 'num_fewshot': ", t.num_fewshot, " shots draw ", draw, " documents but split '",
           t.fewshot_split, "' has ", shots->size());
  }
  const size_t n = limit > 0 ? std::min(docs.size(), size_t(limit)) : docs.size();
  PyRandom rng(seed);
  std::vector<Item> items;
  for (size_t i = 0; i < n; ++i) {
    const Doc& d = docs[i];
    Item item;
    item.doc_id = int(i);
    item.doc = &d;
    std::string prefix = t.doc_description ? t.doc_description(d) : t.description;
    if (shots) {
      std::vector<size_t> drawn;
      if (t.fewshot_first_n) {
        for (size_t k = 0; k < draw; ++k) drawn.push_back(k);
      } else {
        drawn = rng.sample(shots->size(), draw);
      }
      // lm-eval compares documents by value: an equal document in the split is dropped too.
      for (size_t k : drawn)
        if ((*shots)[k].j != d.j && int(item.fewshot_ids.size()) < t.num_fewshot) item.fewshot_ids.push_back(int(k));
      for (int k : item.fewshot_ids) {
        const Doc& e = (*shots)[size_t(k)];
        const std::string text = t.partial ? "" : t.doc_to_text(e) + t.target_delimiter;
        prefix += text + target_text(t, e) + t.fewshot_delimiter;
      }
    }
    if (t.type == OutputType::MultipleChoice) {
      item.choices = t.doc_to_choice(d);
      item.gold = check_choices(t, d, item.choices);
      if (t.partial) {  // Winogrande: each option completes the sentence up to the blank
        const std::string cont = t.target_delimiter + t.doc_to_target(d);
        for (const std::string& c : item.choices) {
          item.contexts.push_back(prefix + c);
          item.continuations.push_back(cont);
        }
      } else {
        item.contexts.push_back(prefix + t.doc_to_text(d));
        for (const std::string& c : item.choices) item.continuations.push_back(t.target_delimiter + c);
      }
    } else if (t.type == OutputType::Rolling) {
      item.target = t.doc_to_target(d);
      if (item.target.empty()) fail(d.where, ": field 'doc_to_target': empty document");
    } else {
      item.contexts.push_back(prefix + t.doc_to_text(d));
      item.target = t.doc_to_target(d);
      if (t.type == OutputType::Loglikelihood) item.continuations.push_back(item.target);
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace zaya::eval
