// JSON task files, with lm-eval's field names: data_files, test_split, fewshot_split,
// output_type, doc_to_text / doc_to_target / doc_to_choice (a field name or a {{field}}
// template), target_delimiter, fewshot_delimiter, description, num_fewshot, metric_list,
// generation_kwargs and filter_list. Paths are relative to the task file.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "core/error.h"
#include "eval/task.h"

namespace zaya::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A field name (the doc has it) or a template whose {{path}} parts are replaced; a template
// that is exactly one {{path}} yields that value itself (a list for doc_to_choice).
json render(const Doc& d, const std::string& spec) {
  if (d.j.contains(spec)) return d.j[spec];
  static const std::regex var("\\{\\{\\s*([A-Za-z0-9_.]+)\\s*\\}\\}");
  std::smatch m;
  if (std::regex_match(spec, m, var)) return doc_field(d, m[1].str());
  std::string out;
  auto begin = spec.cbegin();
  while (std::regex_search(begin, spec.cend(), m, var)) {
    out.append(begin, m[0].first);
    out += json_to_text(doc_field(d, m[1].str()));
    begin = m[0].second;
  }
  out.append(begin, spec.cend());
  return out;
}

struct Reader {
  const json& j;
  std::string path;
  std::set<std::string> seen;
  const json* get(const std::string& k) {
    seen.insert(k);
    auto it = j.find(k);
    return it == j.end() ? nullptr : &*it;
  }
  const json& need(const std::string& k) {
    const json* v = get(k);
    if (!v) fail(path, ": field '", k, "' is missing");
    return *v;
  }
  std::string str(const std::string& k, const std::string& def, bool required = false) {
    const json* v = required ? &need(k) : get(k);
    if (!v) return def;
    if (!v->is_string()) fail(path, ": field '", k, "' must be a string");
    return v->get<std::string>();
  }
  int integer(const std::string& k, int def, int lo, int hi) {
    const json* v = get(k);
    if (!v) return def;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      fail(path, ": field '", k, "' must be an integer in [", lo, ", ", hi, "]");
    return v->get<int>();
  }
};

}  // namespace

Task load_task_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open");
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail(path, ": not a JSON object");
  Reader r{j, path, {}};
  Task t;
  t.source = path;
  t.name = r.str("task", "", true);
  if (t.name.empty()) fail(path, ": field 'task' is empty");
  const std::string type = r.str("output_type", "multiple_choice");
  if (type == "multiple_choice") t.type = OutputType::MultipleChoice;
  else if (type == "loglikelihood") t.type = OutputType::Loglikelihood;
  else if (type == "loglikelihood_rolling") t.type = OutputType::Rolling;
  else if (type == "generate_until") t.type = OutputType::Generate;
  else fail(path, ": field 'output_type': unknown '", type, "' (multiple_choice, loglikelihood, loglikelihood_rolling, generate_until)");

  const json& files = r.need("data_files");
  if (!files.is_object() || files.empty()) fail(path, ": field 'data_files' must map split names to files");
  const fs::path dir = fs::path(path).parent_path();
  std::map<std::string, std::string> where;
  for (auto& [split, file] : files.items()) {
    if (!file.is_string()) fail(path, ": field 'data_files." + split + "' must be a file name");
    const fs::path p = fs::path(file.get<std::string>()).is_absolute() ? fs::path(file.get<std::string>()) : dir / file.get<std::string>();
    t.splits[split] = read_data_file(p.string());
    where[split] = p.string();
  }
  t.test_split = r.str("test_split", files.contains("test") ? "test" : "validation");
  if (!t.splits.count(t.test_split)) fail(path, ": field 'test_split': '", t.test_split, "' is not in data_files");
  if (t.splits[t.test_split].empty()) fail(where[t.test_split], ": field 'test_split': split '", t.test_split, "' is empty");
  t.fewshot_split = r.str("fewshot_split", files.contains("train") ? "train" : "");
  if (!t.fewshot_split.empty() && !t.splits.count(t.fewshot_split))
    fail(path, ": field 'fewshot_split': '", t.fewshot_split, "' is not in data_files");
  // lm-eval compares the fields as written (unset == unset): equal, it draws one extra example.
  t.fewshot_draw_extra = (j.contains("fewshot_split") ? j["fewshot_split"] : json()) ==
                         (j.contains("test_split") ? j["test_split"] : json());
  t.num_fewshot = r.integer("num_fewshot", 0, 0, 1000);
  t.description = r.str("description", "");
  t.target_delimiter = r.str("target_delimiter", t.type == OutputType::Generate ? "" : " ");
  t.fewshot_delimiter = r.str("fewshot_delimiter", "\n\n");

  const std::string text = r.str("doc_to_text", "", t.type != OutputType::Rolling);
  const std::string target = r.str("doc_to_target", "", true);
  t.doc_to_text = [text](const Doc& d) { return json_to_text(render(d, text)); };
  t.doc_to_target = [target](const Doc& d) { return json_to_text(render(d, target)); };
  if (t.type == OutputType::MultipleChoice) {
    const json& c = r.need("doc_to_choice");
    if (c.is_string()) {
      const std::string spec = c.get<std::string>();
      t.doc_to_choice = [spec](const Doc& d) {
        const json v = render(d, spec);
        if (!v.is_array()) fail(d.where, ": field 'doc_to_choice': '", spec, "' is not a list");
        std::vector<std::string> out;
        for (const json& e : v) out.push_back(json_to_text(e));
        return out;
      };
    } else if (c.is_array()) {
      std::vector<std::string> specs;
      for (const json& e : c) {
        if (!e.is_string()) fail(path, ": field 'doc_to_choice': entries must be strings");
        specs.push_back(e.get<std::string>());
      }
      t.doc_to_choice = [specs](const Doc& d) {
        std::vector<std::string> out;
        for (const std::string& s : specs) out.push_back(json_to_text(render(d, s)));
        return out;
      };
    } else {
      fail(path, ": field 'doc_to_choice' must be a field, a template or a list");
    }
    // The gold choice: an index (number or digit string), else the text of a choice.
    auto choice = t.doc_to_choice;
    t.doc_to_gold = [target, choice](const Doc& d) {
      const json v = render(d, target);
      if (v.is_number_integer()) return v.get<int>();
      const std::string s = json_to_text(v);
      if (!s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), ::isdigit)) return std::stoi(s);
      const std::vector<std::string> c = choice(d);
      auto it = std::find(c.begin(), c.end(), s);
      if (it == c.end()) fail(d.where, ": field 'doc_to_target': '", s, "' is neither an index nor one of the choices");
      return int(it - c.begin());
    };
  }

  const json* ml = r.get("metric_list");
  const std::vector<std::string>& known = known_metrics(t.type);
  if (!ml) {
    t.metrics = t.type == OutputType::Loglikelihood ? std::vector<std::string>{"perplexity", "acc"} : known;
  } else {
    if (!ml->is_array() || ml->empty()) fail(path, ": field 'metric_list' must be a non-empty list");
    for (const json& m : *ml) {
      std::string name;
      if (m.is_string()) {
        name = m.get<std::string>();
      } else if (m.is_object() && m.contains("metric") && m["metric"].is_string()) {
        name = m["metric"].get<std::string>();
        if (m.contains("ignore_case")) t.match.ignore_case = m["ignore_case"].get<bool>();
        if (m.contains("ignore_punctuation")) t.match.ignore_punctuation = m["ignore_punctuation"].get<bool>();
        if (m.contains("regexes_to_ignore"))
          for (const json& x : m["regexes_to_ignore"]) t.match.regexes_to_ignore.push_back(x.get<std::string>());
      } else {
        fail(path, ": field 'metric_list': entries are names or {\"metric\": name, ...}");
      }
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string k;
        for (const std::string& s : known) k += (k.empty() ? "" : ", ") + s;
        fail(path, ": field 'metric_list': unknown metric '", name, "' for ", output_type_name(t.type), " (", k, ")");
      }
      t.metrics.push_back(name);
    }
  }
  if (const json* g = r.get("generation_kwargs")) {
    if (!g->is_object()) fail(path, ": field 'generation_kwargs' must be an object");
    if (g->contains("until")) {
      const json& u = (*g)["until"];
      t.until.clear();
      if (u.is_string()) t.until.push_back(u.get<std::string>());
      else if (u.is_array())
        for (const json& s : u) {
          if (!s.is_string() || s.get<std::string>().empty()) fail(path, ": field 'generation_kwargs.until': non-empty strings");
          t.until.push_back(s.get<std::string>());
        }
      else fail(path, ": field 'generation_kwargs.until' must be a string or a list");
    }
    if (g->contains("max_gen_toks")) {
      const json& m = (*g)["max_gen_toks"];
      if (!m.is_number_integer() || m.get<int64_t>() < 1 || m.get<int64_t>() > 1 << 16)
        fail(path, ": field 'generation_kwargs.max_gen_toks' must be an integer in [1, 65536]");
      t.max_gen_toks = m.get<int>();
    }
  }
  if (const json* fl = r.get("filter_list")) {
    if (!fl->is_array()) fail(path, ": field 'filter_list' must be a list");
    for (const json& e : *fl) {
      const std::string fn = e.is_object() && e.contains("function") && e["function"].is_string() ? e["function"].get<std::string>() : "";
      Filter flt;
      if (fn == "regex") {
        if (!e.contains("regex_pattern") || !e["regex_pattern"].is_string()) fail(path, ": field 'filter_list': regex needs 'regex_pattern'");
        flt.pattern = e["regex_pattern"].get<std::string>();
        try {
          (void)std::regex(flt.pattern);
        } catch (const std::regex_error&) {
          fail(path, ": field 'filter_list': bad regex '", flt.pattern, "'");
        }
        flt.group_select = e.value("group_select", 0);
      } else if (fn == "first_line") {
        flt.kind = Filter::FirstLine;
      } else if (fn == "strip") {
        flt.kind = Filter::Strip;
      } else if (fn == "take_first") {
        continue;  // one response per request: nothing to take
      } else {
        fail(path, ": field 'filter_list': unknown function '", fn, "' (regex, first_line, strip, take_first)");
      }
      t.filters.push_back(flt);
    }
  }
  for (auto& [k, v] : j.items())
    if (!r.seen.count(k) && k != "dataset_path" && k != "tag")
      fail(path, ": field '", k, "' is not a task field (see docs/eval.md)");
  // Every document of the test split resolves its fields now, not halfway through a run.
  build_items(t, 0, 0);
  return t;
}

}  // namespace zaya::eval
