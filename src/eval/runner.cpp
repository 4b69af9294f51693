#include "eval/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "core/error.h"

namespace zaya::eval {

using nlohmann::json;

void encode_pair(const Tokenizer& tok, std::string ctx, std::string cont, std::vector<int32_t>& ctx_ids,
                 std::vector<int32_t>& cont_ids) {
  const size_t keep = ctx.find_last_not_of(" \t\n\r\f\v") + 1;  // npos + 1 == 0: all spaces
  cont = ctx.substr(keep) + cont;
  ctx.resize(keep);
  ctx_ids = tok.document_prefix();
  if (ctx_ids.empty() && ctx.empty()) ctx_ids = {tok.eos_id() >= 0 ? tok.eos_id() : tok.bos_id()};
  const std::vector<int32_t> c = tok.encode(ctx), whole = tok.encode(ctx + cont);
  ctx_ids.insert(ctx_ids.end(), c.begin(), c.end());
  cont_ids.assign(whole.begin() + long(std::min(c.size(), whole.size())), whole.end());
}

std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> rolling_windows(const std::vector<int32_t>& tokens,
                                                                                   int32_t prefix, int max_len) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> out;
  if (tokens.empty()) return out;
  const size_t L = tokens.size(), M = size_t(max_len), pred_len = M;  // context_len 1: max_len - 1 + 1
  const size_t first = std::min(M, L);
  out.push_back({{prefix}, std::vector<int32_t>(tokens.begin(), tokens.begin() + long(first))});
  size_t predicted = first;
  while (predicted < L) {
    const size_t n = std::min(L - predicted, pred_len), end = predicted + n;
    // window tokens[end - M - 1 : end - 1] predicting tokens[end - n : end]; disjoint: keep
    // its first len(a) - (n - 1) tokens as the context (one token when the window is full).
    const long a0 = std::max<long>(0, long(end) - long(M) - 1), a1 = long(end) - 1;
    const long keep = (a1 - a0) - long(n - 1);
    out.push_back({std::vector<int32_t>(tokens.begin() + a0, tokens.begin() + a0 + keep),
                   std::vector<int32_t>(tokens.begin() + long(end - n), tokens.begin() + long(end))});
    predicted += n;
  }
  return out;
}

namespace {

struct Req {
  int item = 0;
  std::vector<int32_t> ctx;
  std::vector<std::vector<int32_t>> conts;
  std::vector<int> slot;  // where each continuation's score goes in the item
  std::vector<ContinuationScore> out;
  size_t len() const {
    size_t m = 0;
    for (auto& c : conts) m = std::max(m, c.size());
    return ctx.size() + m;
  }
};

void fit(Req& r, int P, const Task& t, const Item& it) {
  size_t m = 0;
  for (auto& c : r.conts) m = std::max(m, c.size());
  if (m > size_t(P))
    fail(it.doc->where, ": task ", t.name, ": a continuation of ", m, " tokens exceeds the model's context (", P, ")");
  if (r.ctx.size() + m - 1 > size_t(P))  // lm-eval keeps the last max_length + 1 tokens
    r.ctx.erase(r.ctx.begin(), r.ctx.end() - long(size_t(P) + 1 - m));
}

json nan_to_na(double v) { return std::isnan(v) ? json("N/A") : json(v); }

}  // namespace

TaskResult run_task(const InferModel& m, const Tokenizer& tok, const Task& task_in, const RunOptions& o) {
  Task t = task_in;
  if (o.num_fewshot >= 0) t.num_fewshot = o.num_fewshot;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Item> items = build_items(t, o.limit, o.seed);
  const int P = m.cfg().max_position_embeddings;
  int32_t prefix = -1;
  {
    const std::vector<int32_t> p = tok.document_prefix();
    prefix = !p.empty() ? p.back() : tok.eos_id() >= 0 ? tok.eos_id() : tok.bos_id();
  }
  std::vector<Req> reqs;
  std::vector<std::vector<int32_t>> gen_ctx(items.size());
  size_t need = 2;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (t.type == OutputType::Rolling) {
      ZAYA_CHECK(prefix >= 0, "tokenizer ", tok.path(), " has no BOS or EOS to start a document with");
      int k = 0;
      for (auto& [c, x] : rolling_windows(tok.encode(it.target), prefix, P)) {
        Req r{int(i), c, {x}, {k++}, {}};
        need = std::max(need, r.len() - 1);
        reqs.push_back(std::move(r));
      }
      if (reqs.empty() || reqs.back().item != int(i)) fail(it.doc->where, ": task ", t.name, ": the document has no tokens");
    } else if (t.type == OutputType::Generate) {
      std::vector<int32_t> c = tok.document_prefix(), x = tok.encode(it.contexts[0]);
      c.insert(c.end(), x.begin(), x.end());
      const size_t keep = size_t(std::max(1, P - t.max_gen_toks));
      if (c.size() > keep) c.erase(c.begin(), c.end() - long(keep));
      if (c.empty()) c = {prefix};
      need = std::max(need, c.size() + size_t(t.max_gen_toks));
      gen_ctx[i] = std::move(c);
    } else {
      // One request per distinct context: multiple choice shares its context.
      for (size_t k = 0; k < it.continuations.size(); ++k) {
        std::vector<int32_t> c, x;
        encode_pair(tok, it.contexts[it.contexts.size() == 1 ? 0 : k], it.continuations[k], c, x);
        if (x.empty()) fail(it.doc->where, ": task ", t.name, ": continuation '", it.continuations[k], "' has no tokens");
        if (!reqs.empty() && reqs.back().item == int(i) && reqs.back().ctx == c) {
          reqs.back().conts.push_back(std::move(x));
          reqs.back().slot.push_back(int(k));
        } else {
          reqs.push_back(Req{int(i), std::move(c), {std::move(x)}, {int(k)}, {}});
        }
      }
    }
  }
  for (Req& r : reqs) {
    fit(r, P, t, items[size_t(r.item)]);
    need = std::max(need, r.len() - 1);
  }
  Engine eng(m, o.batch, int(std::min<size_t>(need, size_t(P))));
  auto last = std::chrono::steady_clock::now();
  const size_t total = t.type == OutputType::Generate ? items.size() : reqs.size();
  auto progress = [&](size_t done) {
    const auto now = std::chrono::steady_clock::now();
    if (!o.on_progress || (done < total && now - last < std::chrono::seconds(5))) return;
    last = now;
    RunProgress p;
    p.task = t.name, p.done = done, p.total = total, p.seconds = std::chrono::duration<double>(now - t0).count();
    p.unit = t.type == OutputType::Generate ? "generations" : "contexts";
    o.on_progress(p);
  };
  if (!reqs.empty()) {  // every request at once: the engine orders them (longest first) and batches across them
    std::vector<ScoreRequest> sr;
    for (const Req& r : reqs) sr.push_back({&r.ctx, &r.conts});
    std::vector<std::vector<ContinuationScore>> res = eng.score_many(sr, progress);
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].out = std::move(res[i]);
  }
  std::vector<std::string> gen_text(items.size());
  if (t.type == OutputType::Generate) {
    std::vector<size_t> gorder(items.size());
    std::iota(gorder.begin(), gorder.end(), 0);
    std::stable_sort(gorder.begin(), gorder.end(), [&](size_t a, size_t b) { return gen_ctx[a].size() > gen_ctx[b].size(); });
    const int eos = tok.eos_id();
    for (size_t k = 0; k < gorder.size(); ++k) {
      const size_t i = gorder[k];
      std::string text;
      std::vector<int32_t> g = eng.generate(gen_ctx[i], t.max_gen_toks, [&](const std::vector<int32_t>& ids) {
        if (ids.back() == eos || ids.back() == m.cfg().eos_token_id) return true;
        text = tok.decode(ids);
        for (const std::string& u : t.until)
          if (text.find(u) != std::string::npos) return true;
        return false;
      });
      if (!g.empty() && (g.back() == eos || g.back() == m.cfg().eos_token_id)) g.pop_back();
      text = tok.decode(g);
      size_t cut = text.size();
      for (const std::string& u : t.until) cut = std::min(cut, text.find(u));
      gen_text[i] = text.substr(0, cut);
      progress(k + 1);
    }
  }

  // Per document: the scores of its continuations, its metrics, its sample line.
  std::vector<std::vector<ContinuationScore>> per_item(items.size());
  for (Req& r : reqs) {
    auto& v = per_item[size_t(r.item)];
    if (t.type == OutputType::Rolling) {
      v.resize(std::max<size_t>(v.size(), size_t(r.slot[0]) + 1));
      v[size_t(r.slot[0])] = r.out[0];
    } else {
      v.resize(std::max(v.size(), items[size_t(r.item)].continuations.size()));
      for (size_t k = 0; k < r.slot.size(); ++k) v[size_t(r.slot[k])] = r.out[k];
    }
  }
  std::vector<double> acc, acc_norm, acc_bytes, ll, words, bytes, em;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    json s = {{"task", t.name}, {"doc_id", it.doc_id}, {"doc", it.doc->j}};
    if (t.num_fewshot > 0) {  // ours: lm-eval's samples do not name the examples
      s["fewshot_split"] = t.fewshot_split;
      s["fewshot_doc_ids"] = it.fewshot_ids;
    }
    if (t.type == OutputType::MultipleChoice) {
      std::vector<double> sums;
      for (auto& c : per_item[i]) sums.push_back(c.sum());
      const ChoiceScores cs = score_choices(sums, it.choices, it.gold);
      acc.push_back(cs.acc);
      acc_norm.push_back(cs.acc_norm);
      acc_bytes.push_back(cs.acc_bytes);
      s["target"] = it.gold;
      s["acc"] = cs.acc;
      if (std::find(t.metrics.begin(), t.metrics.end(), "acc_norm") != t.metrics.end()) {
        s["acc_norm"] = cs.acc_norm;
        s["acc_bytes"] = cs.acc_bytes;
      }
    } else if (t.type == OutputType::Loglikelihood) {
      ll.push_back(per_item[i][0].sum());
      acc.push_back(per_item[i][0].greedy ? 1.0 : 0.0);
      s["target"] = it.target;
      s["acc"] = acc.back();
      s["perplexity"] = ll.back();
    } else if (t.type == OutputType::Rolling) {
      double sum = 0;
      for (auto& c : per_item[i]) sum += c.sum();
      ll.push_back(sum);
      words.push_back(count_words(it.target));
      bytes.push_back(double(it.target.size()));
      s["target"] = it.target;
      s["word_perplexity"] = json::array({sum, words.back()});
      s["byte_perplexity"] = json::array({sum, bytes.back()});
      s["bits_per_byte"] = json::array({sum, bytes.back()});
    } else {
      const std::string filtered = apply_filters(t.filters, gen_text[i]);
      em.push_back(exact_match(filtered, it.target, t.match));
      s["target"] = it.target;
      s["arguments"] = json::array({json::array({it.contexts[0], {{"until", t.until}, {"max_gen_toks", t.max_gen_toks}}})});
      s["resps"] = json::array({json::array({gen_text[i]})});
      s["filtered_resps"] = json::array({filtered});
      s["exact_match"] = em.back();
    }
    if (t.type != OutputType::Generate && o.samples) {
      json args = json::array(), resps = json::array(), reqs_j = json::array();
      for (const Req& r : reqs) {
        if (r.item != int(i)) continue;
        for (size_t k = 0; k < r.conts.size(); ++k) {
          const size_t slot = size_t(r.slot[k]);
          const ContinuationScore& c = r.out[k];
          if (t.type != OutputType::Rolling)
            args.push_back(json::array({it.contexts[it.contexts.size() == 1 ? 0 : slot], it.continuations[slot]}));
          resps.push_back(json::array({c.sum(), c.greedy}));
          reqs_j.push_back({{"context_ids", r.ctx}, {"continuation_ids", r.conts[k]}, {"logprob", c.sum()},
                            {"is_greedy", c.greedy}, {"token_logprobs", c.logprobs}});
        }
      }
      if (t.type == OutputType::Rolling) args.push_back(json::array({it.target}));
      s["arguments"] = args;
      s["resps"] = resps;
      s["requests"] = reqs_j;
    }
    if (o.samples) *o.samples << s.dump() << "\n";
  }

  TaskResult res;
  res.name = t.name;
  res.type = t.type;
  res.num_fewshot = t.num_fewshot;
  res.n = int(items.size());
  res.stats = eng.stats();
  res.requests = t.type == OutputType::Generate ? items.size() : res.stats.continuations;
  for (const std::string& name : t.metrics) {
    Metric mt{name, 0, std::nan(""), true};
    if (name == "acc") mt = {name, mean(acc), mean_stderr(acc), true};
    else if (name == "acc_norm") mt = {name, mean(acc_norm), mean_stderr(acc_norm), true};
    else if (name == "perplexity") mt = {name, perplexity(ll), bootstrap_stderr_perplexity(ll, 100000, o.seed), false};
    else if (name == "word_perplexity") mt = {name, weighted_perplexity(ll, words), std::nan(""), false};
    else if (name == "byte_perplexity") mt = {name, weighted_perplexity(ll, bytes), std::nan(""), false};
    else if (name == "bits_per_byte") mt = {name, bits_per_byte(ll, bytes), std::nan(""), false};
    else if (name == "exact_match") mt = {name, mean(em), mean_stderr(em), true};
    res.metrics.push_back(mt);
    if (name == "acc_norm")  // the byte-normalised accuracy alongside (lm-eval divides by characters)
      res.metrics.push_back({"acc_bytes", mean(acc_bytes), mean_stderr(acc_bytes), true});
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.on_progress) {
    RunProgress p;
    p.task = t.name, p.finished = true, p.documents = res.n, p.requests = res.requests, p.seconds = res.seconds;
    o.on_progress(p);
  }
  return res;
}

std::vector<Task> resolve_tasks(const std::vector<std::string>& names, const std::string& data_dir,
                                const std::vector<std::string>& task_files) {
  std::vector<Task> out;
  std::vector<Task> files;
  for (const std::string& f : task_files) files.push_back(load_task_file(f));
  std::set<std::string> used;
  for (const std::string& n : names) {
    auto it = std::find_if(files.begin(), files.end(), [&](const Task& t) { return t.name == n; });
    if (it != files.end()) {
      out.push_back(*it);
      used.insert(n);
    } else if (is_builtin_task(n)) {
      if (data_dir.empty()) fail("task '", n, "' reads its data from --data-dir DIR");
      for (Task& t : load_builtin_task(n, data_dir)) out.push_back(std::move(t));
    } else {
      fail("--tasks: unknown task '", n,
           "' (built-in: hellaswag, arc_easy, arc_challenge, piqa, winogrande, lambada, mmlu; or a --task-file's 'task')");
    }
  }
  for (Task& t : files)  // task files not named in --tasks run too
    if (!used.count(t.name)) out.push_back(std::move(t));
  if (out.empty()) fail("no tasks: give --tasks NAME[,NAME...] or --task-file F.json");
  return out;
}

std::vector<TaskResult> run_tasks(const InferModel& m, const Tokenizer& tok, std::vector<Task> tasks,
                                  const RunOptions& o) {
  std::vector<TaskResult> out;
  std::vector<double> se, n, acc;
  int shots = 0;
  for (const Task& t : tasks) {
    out.push_back(run_task(m, tok, t, o));
    if (t.name.rfind("mmlu_", 0) == 0) {
      shots = out.back().num_fewshot;
      se.push_back(out.back().metrics[0].stderr_);
      n.push_back(out.back().n);
      acc.push_back(out.back().metrics[0].value);
    }
  }
  if (!n.empty()) {  // the MMLU group: accuracy over all its questions, lm-eval's pooled stderr
    TaskResult g;
    g.name = "mmlu";
    g.group = true;
    g.num_fewshot = shots;
    double a = 0, total = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      a += acc[i] * n[i];
      total += n[i];
    }
    for (double& s : se)
      if (std::isnan(s)) s = 0;  // a one-question subject adds no variance
    g.n = int(total);
    g.metrics.push_back({"acc", a / total, pooled_stderr(se, n), true});
    out.push_back(g);
  }
  return out;
}

json results_json(const std::vector<TaskResult>& r, const json& config) {
  json res = json::object(), ns = json::object(), shots = json::object();
  for (const TaskResult& t : r) {
    json m = {{"alias", t.name}};
    for (const Metric& x : t.metrics) {
      m[x.name] = nan_to_na(x.value);
      m[x.name + "_stderr"] = nan_to_na(x.stderr_);
    }
    res[t.name] = m;
    ns[t.name] = t.n;
    shots[t.name] = t.num_fewshot;
  }
  return {{"results", res}, {"n_samples", ns}, {"n-shot", shots}, {"config", config}};
}

std::string markdown_table(const std::vector<TaskResult>& r) {
  std::string out = "|Tasks|n-shot|Metric| |Value| |Stderr|\n|-----|-----:|------|---|-----:|---|-----:|\n";
  char buf[512];
  for (const TaskResult& t : r) {
    bool first = true;
    for (const Metric& m : t.metrics) {
      std::string se = std::isnan(m.stderr_) ? "N/A" : "";
      if (se.empty()) {
        std::snprintf(buf, sizeof buf, "%.4f", m.stderr_);
        se = buf;
      }
      std::snprintf(buf, sizeof buf, "|%s|%s|%s|%s|%.4f|±|%s|\n", first ? t.name.c_str() : "",
                    first ? std::to_string(t.num_fewshot).c_str() : "", m.name.c_str(),
                    m.higher_is_better ? "↑" : "↓", m.value, se.c_str());
      out += buf;
      first = false;
    }
  }
  return out;
}

}  // namespace zaya::eval
