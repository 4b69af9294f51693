#include "train/run_config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "ckpt/tokenizer_files.h"
#include "core/error.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One TOML table read field by field; `where` is its dotted path ("optimizer.muon").
// Every error names the file and the field; finish() rejects keys nobody asked for.
class Fields {
 public:
  Fields(const toml::table* t, std::string file, std::string where)
      : t_(t), file_(std::move(file)), where_(std::move(where)) {}

  std::string field(std::string_view k) const { return where_.empty() ? std::string(k) : where_ + "." + std::string(k); }
  [[noreturn]] void bad(std::string_view k, const std::string& what) const {
    fail("run config ", file_, ": field ", field(k), " ", what);
  }
  const toml::node* get(std::string_view k) {
    used_.insert(std::string(k));
    return t_ ? t_->get(k) : nullptr;
  }
  bool has(std::string_view k) const { return t_ && t_->contains(k); }

  void str(std::string_view k, std::string& out) {
    if (auto n = get(k)) {
      if (!n->is_string()) bad(k, "must be a string");
      out = n->as_string()->get();
    }
  }
  template <class I>
  void integer(std::string_view k, I& out, int64_t lo, int64_t hi = INT64_MAX) {
    auto n = get(k);
    if (!n) return;
    if (!n->is_integer()) bad(k, "must be an integer");
    int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) bad(k, cat("must be in [", lo, ", ", hi, "], got ", v));
    out = I(v);
  }
  void real(std::string_view k, double& out, double lo, double hi, bool lo_open = false, bool hi_open = false) {
    auto n = get(k);
    if (!n) return;
    if (!n->is_number()) bad(k, "must be a number");
    double v = n->is_integer() ? double(n->as_integer()->get()) : n->as_floating_point()->get();
    if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo) || (hi_open && v == hi))
      bad(k, cat("must be in ", lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]", ", got ", v));
    out = v;
  }
  void boolean(std::string_view k, bool& out) {
    if (auto n = get(k)) {
      if (!n->is_boolean()) bad(k, "must be true or false");
      out = n->as_boolean()->get();
    }
  }
  void strings(std::string_view k, std::vector<std::string>& out) {
    auto n = get(k);
    if (!n) return;
    if (!n->is_array()) bad(k, "must be a list of strings");
    out.clear();
    for (auto&& e : *n->as_array()) {
      if (!e.is_string()) bad(k, "must be a list of strings");
      out.push_back(e.as_string()->get());
    }
  }
  template <class E>
  void choice(std::string_view k, E& out, std::initializer_list<std::pair<const char*, E>> options) {
    choice_in(k, out, options);
  }
  template <class E, size_t N>
  void choice(std::string_view k, E& out, const std::array<std::pair<const char*, E>, N>& options) {
    choice_in(k, out, options);
  }
  template <class E, class Options>
  void choice_in(std::string_view k, E& out, const Options& options) {
    std::string s;
    if (!has(k)) return (void)get(k);
    str(k, s);
    std::string names;
    for (auto& [name, v] : options) {
      if (s == name) return (void)(out = v);
      names += names.empty() ? name : std::string(" | ") + name;
    }
    bad(k, cat("must be one of ", names, ", got \"", s, "\""));
  }
  const toml::table* table(std::string_view k) {
    auto n = get(k);
    if (!n) return nullptr;
    if (!n->is_table()) bad(k, "must be a table");
    return n->as_table();
  }
  void finish() const {
    if (!t_) return;
    for (auto&& [k, v] : *t_)
      if (!used_.count(std::string(k.str()))) fail("run config ", file_, ": unknown field ", field(k.str()));
  }

 private:
  const toml::table* t_;
  std::string file_, where_;
  std::set<std::string> used_;
};

ModelConfig read_model(const toml::table* t, const std::string& file, std::string& model_path) {
  if (!t) fail("run config ", file, ": missing table [model]");
  toml::table overrides = *t;
  if (auto c = t->get("config")) {
    if (!c->is_string()) fail("run config ", file, ": field model.config must be a string");
    model_path = c->as_string()->get();
    overrides.erase("config");
    if (overrides.empty()) return load_model_config(model_path);
    if (fs::path(model_path).extension() != ".toml")
      fail("run config ", file, ": model-config overrides in [model] need a TOML model.config, got ", model_path);
    toml::table base;
    try {
      base = toml::parse_file(model_path);
    } catch (const toml::parse_error& e) {
      fail("model config ", model_path, ": ", e.description(), " (line ", e.source().begin.line, ")");
    } catch (const std::exception&) {
      fail("run config ", file, ": field model.config: cannot read ", model_path);
    }
    for (auto&& [k, v] : overrides) base.insert_or_assign(k, v);
    overrides = std::move(base);
  }
  std::ostringstream os;
  os << overrides;
  return parse_model_config_toml(os.str(), file + " [model]" + (model_path.empty() ? "" : " over " + model_path));
}

RunSource read_source(const toml::table* t, const std::string& file, size_t i) {
  Fields f(t, file, cat("data.sources[", i, "]"));
  RunSource s;
  f.str("name", s.name);
  f.choice("format", s.megatron, {{"zaya", false}, {"megatron", true}});
  f.str("dir", s.dir);
  f.strings("train", s.train);
  f.strings("val", s.val);
  f.str("prefix", s.prefix);
  f.str("val_prefix", s.val_prefix);
  f.finish();
  if (s.name.empty()) f.bad("name", "must be given (a non-empty string)");
  if (s.megatron) {
    for (const char* k : {"dir", "train", "val"})
      if (f.has(k)) f.bad(k, "does not go with format = \"megatron\" (give prefix and val_prefix)");
    if (s.prefix.empty()) f.bad("prefix", "must be given with format = \"megatron\" (the dataset's PREFIX of PREFIX.bin / PREFIX.idx)");
    if (f.has("val_prefix") && s.val_prefix.empty()) f.bad("val_prefix", "must be a non-empty PREFIX");
    return s;
  }
  for (const char* k : {"prefix", "val_prefix"})
    if (f.has(k)) f.bad(k, "needs format = \"megatron\"");
  if (!s.dir.empty() && (!s.train.empty() || !s.val.empty())) f.bad("dir", "excludes train/val lists");
  if (s.dir.empty() && s.train.empty()) f.bad("train", "must list at least one shard (or give dir)");
  return s;
}

RunPhase read_phase(const toml::table* t, const std::string& file, size_t i, const RunConfig& c) {
  Fields f(t, file, cat("phases[", i, "]"));
  RunPhase p;
  p.name = cat("phase", i + 1);
  p.global_batch = c.global_batch;
  p.rope_theta = c.model.rope_theta;
  p.seq_len = 0;
  f.str("name", p.name);
  f.integer("tokens", p.tokens, 1);
  f.integer("seq_len", p.seq_len, 1, c.model.max_position_embeddings);
  f.real("rope_theta", p.rope_theta, 0, 1e12, true);
  f.integer("global_batch", p.global_batch, 1);
  if (!f.has("tokens")) f.bad("tokens", "is required (the phase's token budget)");
  if (!f.has("seq_len")) f.bad("seq_len", "is required");
  p.weights.assign(c.sources.size(), 0.0);
  if (const toml::table* mix = f.table("mixture")) {
    Fields m(mix, file, cat("phases[", i, "].mixture"));
    for (size_t s = 0; s < c.sources.size(); ++s) m.real(c.sources[s].name, p.weights[s], 0, 1e12);
    m.finish();
  } else {
    p.weights.assign(c.sources.size(), 1.0);  // no mixture: sources equally weighted
  }
  double sum = 0;
  for (double w : p.weights) sum += w;
  if (sum <= 0) f.bad("mixture", "has no positive weight");
  f.finish();
  return p;
}

}  // namespace

RunConfig parse_run_config(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail("run config ", path, ": ", e.description(), " (line ", e.source().begin.line, ")");
  }
  RunConfig c;
  c.path = path;
  c.text = text;
  Fields top(&root, path, "");

  Fields run(top.table("run"), path, "run");
  run.str("name", c.name);
  c.out_dir = "runs/" + c.name;
  run.str("out_dir", c.out_dir);
  run.integer("seed", c.seed, 0);
  std::string precision = "fp32";
  run.str("precision", precision);
  if (precision != "fp32" && precision != "bf16") run.bad("precision", cat("must be fp32 or bf16, got \"", precision, "\""));
  c.bf16 = precision == "bf16";
  run.finish();

  c.model = read_model(top.table("model"), path, c.model_path);

  Fields data(top.table("data"), path, "data");
  data.str("tokenizer", c.tokenizer);
  if (auto n = data.get("sources")) {
    if (!n->is_array_of_tables()) data.bad("sources", "must be an array of tables ([[data.sources]])");
    size_t i = 0;
    for (auto&& e : *n->as_array()) c.sources.push_back(read_source(e.as_table(), path, i++));
  }
  data.finish();
  if (c.sources.empty()) data.bad("sources", "must hold at least one [[data.sources]] entry");
  for (size_t i = 0; i < c.sources.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.sources[i].name == c.sources[j].name) data.bad("sources", cat("has the name \"", c.sources[i].name, "\" twice"));

  Fields batch(top.table("batch"), path, "batch");
  batch.integer("global_batch", c.global_batch, 1);
  batch.integer("micro_batch", c.micro_batch, 1);
  int accumulation = 0;
  batch.integer("accumulation", accumulation, 1);
  batch.real("ramp_start_fraction", c.ramp.start_fraction, 0, 1, true);
  batch.integer("ramp_tokens", c.ramp.ramp_tokens, 0);
  if (c.global_batch == 0) batch.bad("global_batch", "is required");
  if (c.micro_batch == 0) c.micro_batch = c.global_batch;
  if (c.global_batch % c.micro_batch)
    batch.bad("global_batch", cat(c.global_batch, " is not a multiple of micro_batch ", c.micro_batch));
  if (accumulation && accumulation * c.micro_batch != c.global_batch)
    batch.bad("accumulation", cat(accumulation, " x micro_batch ", c.micro_batch, " != global_batch ", c.global_batch));
  batch.finish();

  if (auto n = top.get("phases")) {
    if (!n->is_array_of_tables()) top.bad("phases", "must be an array of tables ([[phases]])");
    size_t i = 0;
    for (auto&& e : *n->as_array()) c.phases.push_back(read_phase(e.as_table(), path, i++, c));
  }
  if (c.phases.empty()) top.bad("phases", "must hold at least one [[phases]] entry");
  for (const RunPhase& p : c.phases)
    if (p.global_batch % c.micro_batch)
      top.bad("phases", cat("entry ", p.name, ": global_batch ", p.global_batch, " is not a multiple of micro_batch ",
                            c.micro_batch));

  Fields opt(top.table("optimizer"), path, "optimizer");
  OptimizerSettings& o = c.optimizer;
  opt.choice("kind", o.kind, kOptimizerKinds);
  opt.real("lr", c.peak_lr, 0, 10, true);
  opt.real("beta1", o.adamw.beta1, 0, 1, false, true);
  opt.real("beta2", o.adamw.beta2, 0, 1, false, true);
  opt.real("eps", o.adamw.eps, 0, 1, true);
  opt.real("weight_decay", o.adamw.weight_decay, 0, 10);
  opt.real("grad_clip", c.grad_clip, 0, 1e12);
  opt.boolean("decay_embeddings", o.decay_embeddings);
  opt.real("router_lr_scale", o.router_lr_scale, 0, 100);
  Fields muon(opt.table("muon"), path, "optimizer.muon");
  muon.real("momentum", o.muon.momentum, 0, 1, false, true);
  muon.boolean("nesterov", o.muon.nesterov);
  muon.integer("ns_steps", o.muon.ns_steps, 1, 100);
  muon.real("rms_scale", o.muon.rms_scale, 0, 100, true);
  muon.finish();
  opt.finish();

  Fields sch(top.table("schedule"), path, "schedule");
  c.schedule.peak_lr = c.peak_lr;
  sch.choice("kind", c.schedule.kind,
             {{"constant", LrScheduleKind::Constant}, {"cosine", LrScheduleKind::Cosine}, {"wsd", LrScheduleKind::WSD}});
  sch.integer("warmup_steps", c.schedule.warmup_steps, 0);
  sch.real("min_lr_ratio", c.schedule.min_lr_ratio, 0, 1);
  sch.real("decay_fraction", c.schedule.decay_fraction, 0, 1);
  sch.finish();

  Fields bal(top.table("balancing"), path, "balancing");
  BalancerSettings& b = c.balancing;
  bal.choice("method", b.method,
             {{"bias_adamw", BalanceMethod::BiasAdamW}, {"bias_sign", BalanceMethod::BiasSign},
              {"aux_loss", BalanceMethod::AuxLoss}, {"none", BalanceMethod::None}});
  bal.real("lr", b.lr, 0, 10, true);
  bal.real("beta1", b.beta1, 0, 1, false, true);
  bal.real("beta2", b.beta2, 0, 1, false, true);
  bal.real("eps", b.eps, 0, 1, true);
  bal.real("weight_decay", b.weight_decay, 0, 10);
  bal.real("sign_rate", b.sign_rate, 0, 10, true);
  bal.real("aux_coeff", b.aux_coeff, 0, 100);
  bal.boolean("include_skip", b.include_skip);
  bal.boolean("follow_mean", b.follow_mean);
  bal.finish();

  Fields an(top.table("anomaly"), path, "anomaly");
  RouterHealthSettings& rh = c.router_health;
  an.real("router_min_entropy", rh.min_entropy, 0, 1);
  an.real("router_max_skip", rh.max_skip, 0, 1);
  an.integer("router_steps", rh.steps, 1, 1 << 30);
  an.boolean("router_rollback", rh.rollback);
  an.finish();

  Fields ev(top.table("eval"), path, "eval");
  ev.integer("interval", c.eval_interval, 0);
  ev.integer("windows", c.eval_windows, 0, 1 << 20);
  ev.integer("batch", c.eval_batch, 1, 1 << 16);
  ev.strings("tasks", c.eval_tasks);
  ev.str("data_dir", c.eval_data_dir);
  ev.integer("tasks_interval", c.eval_tasks_interval, 0);
  ev.integer("tasks_limit", c.eval_tasks_limit, 0, 1 << 30);
  ev.finish();

  Fields ck(top.table("checkpoint"), path, "checkpoint");
  ck.integer("interval", c.ckpt_interval, 0);
  ck.integer("keep_last", c.keep_last, 1, 1 << 20);
  c.ckpt_dir = (fs::path(c.out_dir) / "ckpt").string();
  ck.str("dir", c.ckpt_dir);
  ck.boolean("async", c.ckpt_async);
  ck.finish();

  Fields lg(top.table("log"), path, "log");
  lg.integer("interval", c.log_interval, 1);
  lg.boolean("tensorboard", c.tensorboard);
  lg.finish();

  Fields par(top.table("parallel"), path, "parallel");
  par.integer("ep", c.par_ep, 1, 1 << 16);
  par.integer("cp", c.par_cp, 1, 1 << 16);
  par.boolean("zero1", c.zero1);
  par.real("bucket_mb", c.bucket_mb, 0, 1 << 16, true);
  par.real("comm_timeout", c.comm_timeout, 0, 1e7, true);
  par.finish();

  top.finish();
  if (c.tokenizer.empty()) {
    // Default: the tokenizer `zaya prepare` wrote next to the first source's shards.
    const RunSource& s0 = c.sources[0];
    const fs::path dir = s0.megatron        ? fs::path(s0.prefix).parent_path()
                         : s0.dir.empty() ? fs::path(s0.train[0]).parent_path()
                                          : fs::path(s0.dir);
    c.tokenizer = find_model_tokenizer(dir.string());  // tokenizer.json, else tokenizer.model
    if (c.tokenizer.empty()) c.tokenizer = (dir / "tokenizer.model").string();
  }
  return c;
}

void RunConfig::resolve_data() {
  for (RunSource& s : sources) {
    if (s.megatron || s.dir.empty() || !s.train.empty()) continue;
    const fs::path meta = fs::path(s.dir) / "meta.json";
    std::error_code ec;
    if (!fs::is_regular_file(meta, ec))
      fail("run config ", path, ": data source ", s.name, ": ", meta.string(),
           fs::exists(meta, ec) ? " is not a file" : " is missing", " (run zaya prepare into ", s.dir, ")");
    std::ifstream in(meta);
    if (!in) fail("run config ", path, ": data source ", s.name, ": ", meta.string(), ": cannot open the file");
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) fail("data source ", s.name, ": ", meta.string(), " is not valid JSON");
    if (!j.is_object()) fail("data source ", s.name, ": ", meta.string(), " is not a JSON object");
    if (j.value("format", "") == "megatron.mmidx") {  // zaya prepare --output-format megatron
      for (const char* split : {"train", "val"}) {
        if (!j.contains(split) || !j[split].is_object() || !j[split].contains("megatron_prefix") ||
            !j[split]["megatron_prefix"].is_string() || j[split]["megatron_prefix"].get<std::string>().empty())
          fail("data source ", s.name, ": ", meta.string(), " has no ", split, ".megatron_prefix");
        (std::string(split) == "train" ? s.prefix : s.val_prefix) =
            (fs::path(s.dir) / j[split]["megatron_prefix"].get<std::string>()).string();
      }
      s.megatron = true;
      continue;
    }
    for (const char* split : {"train", "val"}) {
      auto& out = std::string(split) == "train" ? s.train : s.val;
      if (!j.contains(split) || !j[split].is_object() || !j[split].contains("shards") || !j[split]["shards"].is_array())
        fail("data source ", s.name, ": ", meta.string(), " has no ", split, ".shards list");
      for (const auto& sh : j[split]["shards"]) {
        if (!sh.is_string() || sh.get<std::string>().empty())
          fail("data source ", s.name, ": ", meta.string(), ": field ", split, ".shards holds ", sh.dump(),
               ", not a file name");
        out.push_back((fs::path(s.dir) / sh.get<std::string>()).string());
      }
    }
    if (s.train.empty()) fail("data source ", s.name, ": ", meta.string(), " lists no train shards");
  }
}

RunConfig load_run_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("run config ", path, ": cannot open the file");
  std::ostringstream os;
  os << in.rdbuf();
  return parse_run_config(os.str(), path);
}

std::vector<DataSource> RunConfig::train_sources() const {
  std::vector<DataSource> out;
  for (const RunSource& s : sources) out.push_back({s.name, s.megatron ? std::vector<std::string>{} : s.train, s.prefix});
  return out;
}

std::vector<DataSource> RunConfig::val_sources() const {
  std::vector<DataSource> out;
  for (const RunSource& s : sources) {
    if (s.megatron && !s.val_prefix.empty()) out.push_back({s.name, {}, s.val_prefix});
    if (!s.megatron && !s.val.empty()) out.push_back({s.name, s.val, {}});
  }
  return out;
}

TrainPlan RunConfig::plan(int dp_world) const {
  std::vector<PhaseShape> shapes;
  for (const RunPhase& p : phases) shapes.push_back({p.name, p.tokens, p.seq_len, p.global_batch});
  return TrainPlan(std::move(shapes), ramp, micro_batch * dp_world);
}

}  // namespace zaya
