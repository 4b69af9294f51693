#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "kernels/gemm.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kParamsFile = "params-r00000.safetensors";
constexpr const char* kOptimFile = "optim-r00000.safetensors";
constexpr const char* kBuffersFile = "buffers.safetensors";

std::string human_seconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = long(s + 0.5);
  if (t >= 3600) return cat(t / 3600, "h", (t % 3600) / 60, "m");
  if (t >= 60) return cat(t / 60, "m", t % 60, "s");
  return cat(t, "s");
}

std::string human_rate(double r) {
  char buf[32];
  if (r >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  else if (r >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", r);
  return buf;
}

json load_json(const LayerLoad& l) {
  return {{"max_frac", l.max_frac}, {"min_frac", l.min_frac}, {"entropy", l.entropy}, {"skip", l.skip_rate}};
}

}  // namespace

Trainer::Trainer(RunConfig cfg, TrainerOptions opt, TrainerHooks hooks)
    : cfg_(std::move(cfg)), options_(opt), hooks_(std::move(hooks)), plan_(cfg_.plan()) {
  if (cfg_.bf16)
    ZAYA_CHECK(bf16_gemm_supported(), "run config ", cfg_.path,
               ": run.precision = \"bf16\" needs AVX512-BF16 or AMX, which this CPU lacks (use \"fp32\")");
  gemm_settings().precision = cfg_.bf16 ? GemmPrecision::BF16 : GemmPrecision::FP32;
  cfg_.resolve_data();

  loader_ = std::make_unique<DataLoader>(cfg_.train_sources(), cfg_.seed);
  ZAYA_CHECK(int(loader_->vocab_size()) <= cfg_.model.vocab_size, "run config ", cfg_.path, ": the data's vocabulary (",
             loader_->vocab_size(), ") exceeds the model's vocab_size (", cfg_.model.vocab_size, ")");
  for (const RunSource& s : cfg_.sources) {
    if (s.val.empty()) continue;
    val_.emplace_back(s.name + "/val", s.val);
    val_names_.push_back(s.name);
  }

  model_ = std::make_unique<Model<float>>(cfg_.model);
  model_->init(cfg_.seed);
  model_->reserve(cfg_.micro_batch, cfg_.phases[0].seq_len);
  if (cfg_.balancing.method == BalanceMethod::AuxLoss) model_->set_aux_loss_coeff(cfg_.balancing.aux_coeff);
  optimizer_ = std::make_unique<Optimizer>(model_->layout.params, cfg_.optimizer);
  balancer_ = std::make_unique<RouterBalancer>(model_->layout, cfg_.balancing);

  std::error_code ec;
  fs::create_directories(cfg_.out_dir, ec);
  if (ec) fail("run config ", cfg_.path, ": cannot create out_dir ", cfg_.out_dir, " (", ec.message(), ")");
  fs::create_directories(cfg_.ckpt_dir, ec);
  remove_stale_temporaries(cfg_.ckpt_dir);
  if (options_.resume) {
    if (fs::exists(fs::path(cfg_.ckpt_dir) / "latest"))
      load_checkpoint(cfg_.ckpt_dir);
    else
      log_info("resume: no checkpoint under ", cfg_.ckpt_dir, "; starting from scratch");
  }
  if (options_.metrics) {
    trim_metrics_after(step_);
    metrics_ = std::fopen((fs::path(cfg_.out_dir) / "metrics.jsonl").c_str(), "a");
    ZAYA_CHECK(metrics_, cfg_.out_dir, "/metrics.jsonl: cannot open for appending");
  }
}

Trainer::~Trainer() {
  if (metrics_) std::fclose(metrics_);
}

int64_t Trainer::stop_step() const {
  return options_.stop_step >= 0 ? std::min(options_.stop_step, plan_.total_steps()) : plan_.total_steps();
}

// ---------------------------------------------------------------------------------------
// The loop

void Trainer::run() {
  const int64_t stop = stop_step();
  if (hooks_.heartbeat) hooks_.heartbeat("start", step_, 0);
  if (options_.progress)
    std::printf("run %s: %lld steps, %.3g tokens, %d phase(s), %s, %s, %zu parameters; from step %lld\n",
                cfg_.name.c_str(), (long long)plan_.total_steps(), double(plan_.total_tokens()), plan_.num_phases(),
                optimizer_kind_name(cfg_.optimizer.kind), cfg_.bf16 ? "bf16" : "fp32", model_->params.size(),
                (long long)step_);
  if (step_ == 0 && cfg_.eval_interval > 0 && stop > 0) evaluate();
  while (step_ < stop) {
    StepRecord r = train_step();
    if (options_.progress && (r.step % cfg_.log_interval == 0 || r.step == stop || r.step == 1)) log_progress(r);
    if (hooks_.heartbeat) hooks_.heartbeat("step", step_, r.seconds);
    // issue 8: loss / gradient-norm spike detection (z-score window) decides here whether
    // the next steps continue or the run exits for a rollback.
    const bool last = step_ == stop;
    if (cfg_.eval_interval > 0 ? (step_ % cfg_.eval_interval == 0 || last) : last) evaluate();
    if (cfg_.ckpt_interval > 0 && step_ % cfg_.ckpt_interval == 0) save_checkpoint();
  }
  if (options_.save_final && last_saved_ != step_) save_checkpoint();
  if (hooks_.heartbeat) hooks_.heartbeat("done", step_, 0);
}

StepRecord Trainer::train_step() {
  Timer timer;
  const StepShape shape = plan_.at(step_);
  if (shape.phase != phase_) enter_phase(shape.phase);
  const int T = shape.seq_len, mb = cfg_.micro_batch;
  const int rank = 0, world = 1;  // DP: this rank and the data-parallel world
  loader_->next_batch(shape.global_batch, rank, world, batch_);
  const int local = shape.global_batch / world, micro_steps = local / mb;
  const double count_all = double(shape.global_batch) * T;  // every target counts (packed windows)

  model_->zero_grads();
  balancer_->clear_counts();
  double loss_sum = 0, aux_sum = 0;
  inputs_.resize(size_t(mb) * T);
  targets_.resize(size_t(mb) * T);
  for (int k = 0; k < micro_steps; ++k) {
    for (int row = 0; row < mb; ++row) {
      const int32_t* seq = batch_.data() + size_t(k * mb + row) * (T + 1);
      std::copy(seq, seq + T, inputs_.begin() + size_t(row) * T);
      std::copy(seq + 1, seq + T + 1, targets_.begin() + size_t(row) * T);
    }
    ForwardResult f = model_->forward(inputs_.data(), targets_.data(), mb, T, 0);
    // Gradient of the mean over the whole global batch: weight each micro-batch by its share.
    model_->backward(float(f.count / count_all));
    loss_sum += f.loss_sum;
    aux_sum += f.aux_loss;
    balancer_->add_counts(model_->class_counts());
  }
  // DP: all-reduce (or reduce-scatter, ZeRO-1) grads / world; all-reduce loss_sum, aux_sum
  // and balancer_->counts() (sums) so every rank sees the global batch.
  StepRecord r;
  r.phase = shape.phase;
  r.global_batch = shape.global_batch;
  r.seq_len = T;
  r.loss = loss_sum / count_all;
  r.aux_loss = aux_sum / micro_steps;
  r.grad_norm = std::sqrt(sum_squares(model_->grads.data(), {0, model_->grads.size()}));
  r.lr = cfg_.schedule.at(step_, plan_.total_steps());
  const double scale = clip_factor(r.grad_norm, cfg_.grad_clip);
  r.clipped = scale < 1.0;
  r.skipped = !std::isfinite(r.loss) || !std::isfinite(r.grad_norm);
  if (r.skipped) {
    // A non-finite step must not poison the weights; DP: ranks agree through the reduced norm.
    ++skipped_;
    log_warn("step ", step_ + 1, ": non-finite loss or gradient norm; update skipped (", skipped_, " so far)");
    balancer_->compute_loads();
  } else {
    optimizer_->step(model_->params.data(), model_->grads.data(), r.lr, scale);
    balancer_->update(model_->buffers.data());
  }
  ++step_;
  tokens_ += uint64_t(shape.global_batch) * uint64_t(T);
  r.step = step_;
  r.tokens = tokens_;
  r.seconds = timer.seconds();
  r.tokens_per_second = double(shape.global_batch) * T / std::max(r.seconds, 1e-9);
  r.loads = balancer_->loads();
  r.worst_load = balancer_->worst();
  ema_tps_ = ema_tps_ > 0 ? 0.9 * ema_tps_ + 0.1 * r.tokens_per_second : r.tokens_per_second;
  write_metrics(step_json(r));
  if (hooks_.on_step) hooks_.on_step(r);
  return r;
}

// A phase changes the mixture, the sequence length and the RoPE base at its first step.
void Trainer::enter_phase(int phase) {
  const RunPhase& p = cfg_.phases[size_t(phase)];
  loader_->set_phase(p.weights, p.seq_len);
  model_->set_rope_theta(p.rope_theta);
  model_->reserve(cfg_.micro_batch, p.seq_len);
  if (phase_ >= 0 && options_.progress)
    std::printf("phase %d (%s) from step %lld: seq_len %d, rope_theta %g, global batch %d\n", phase + 1,
                p.name.c_str(), (long long)step_, p.seq_len, p.rope_theta, p.global_batch);
  phase_ = phase;
}

EvalRecord Trainer::evaluate() {
  if (hooks_.heartbeat) hooks_.heartbeat("eval", step_, 0);
  EvalRecord e;
  e.step = step_;
  const int T = cfg_.phases[size_t(std::max(phase_, 0))].seq_len, B = cfg_.eval_batch;
  double sum_all = 0;
  int64_t count_all = 0;
  std::vector<int32_t> window(size_t(B) * (T + 1)), in(size_t(B) * T), tg(size_t(B) * T);
  if (phase_ < 0) model_->set_rope_theta(cfg_.phases[0].rope_theta);
  for (size_t s = 0; s < val_.size(); ++s) {
    const uint64_t n = std::min<uint64_t>(uint64_t(cfg_.eval_windows), num_eval_windows(val_[s], T));
    double sum = 0;
    int64_t count = 0;
    for (uint64_t w0 = 0; w0 < n; w0 += uint64_t(B)) {
      const int rows = int(std::min<uint64_t>(uint64_t(B), n - w0));
      for (int r = 0; r < rows; ++r) {
        eval_window(val_[s], T, w0 + uint64_t(r), window.data() + size_t(r) * (T + 1));
        const int32_t* seq = window.data() + size_t(r) * (T + 1);
        std::copy(seq, seq + T, in.begin() + size_t(r) * T);
        std::copy(seq + 1, seq + T + 1, tg.begin() + size_t(r) * T);
      }
      ForwardResult f = model_->forward(in.data(), tg.data(), rows, T, 0);
      sum += f.loss_sum;
      count += f.count;
    }
    if (count > 0) e.per_source.push_back({val_names_[s], sum / double(count)});
    sum_all += sum;
    count_all += count;
  }
  e.tokens = count_all;
  e.loss = count_all > 0 ? sum_all / double(count_all) : std::nan("");
  json j = {{"type", "eval"}, {"step", step_}, {"tokens_trained", tokens_}, {"val_loss", e.loss},
            {"val_ppl", std::exp(e.loss)}, {"val_tokens", e.tokens}};
  for (auto& [name, l] : e.per_source) j["sources"][name] = l;
  write_metrics(j);
  if (options_.progress && count_all > 0)
    std::printf("eval  step %lld  val loss %.4f  ppl %.2f  (%lld tokens)\n", (long long)step_, e.loss,
                std::exp(e.loss), (long long)count_all);
  if (hooks_.on_eval) hooks_.on_eval(e);
  return e;
}

// ---------------------------------------------------------------------------------------
// Progress and metrics

void Trainer::log_progress(const StepRecord& r) {
  const double remaining = double(plan_.total_tokens() > tokens_ ? plan_.total_tokens() - tokens_ : 0);
  const int64_t stop = stop_step();
  const double eta = stop < plan_.total_steps() ? double(stop - step_) * r.seconds : remaining / std::max(ema_tps_, 1e-9);
  const LayerLoad& w = r.worst_load;
  std::printf("step %lld/%lld  loss %.4f  lr %.2e  gnorm %.3f%s  %s tok/s  ETA %s  load max %.2fx min %.2fx H %.3f "
              "skip %.1f%%%s\n",
              (long long)r.step, (long long)stop, r.loss, r.lr, r.grad_norm, r.clipped ? "*" : "",
              human_rate(r.tokens_per_second).c_str(), human_seconds(eta).c_str(), w.max_rel, w.min_rel, w.entropy,
              100 * w.skip_rate, r.skipped ? "  SKIPPED" : "");
  std::fflush(stdout);
}

json Trainer::step_json(const StepRecord& r) const {
  json loads = json::array();
  for (const LayerLoad& l : r.loads) loads.push_back(load_json(l));
  return {{"type", "step"},        {"step", r.step},         {"phase", r.phase},
          {"loss", r.loss},        {"aux_loss", r.aux_loss}, {"lr", r.lr},
          {"grad_norm", r.grad_norm}, {"clipped", r.clipped}, {"skipped", r.skipped},
          {"global_batch", r.global_batch}, {"seq_len", r.seq_len}, {"tokens", r.tokens},
          {"step_s", r.seconds},   {"tokens_per_s", r.tokens_per_second},
          {"load", load_json(r.worst_load)}, {"layers", loads}};
}

void Trainer::write_metrics(const json& j) {
  if (!metrics_) return;
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), metrics_);
  std::fflush(metrics_);
}

// A resumed run rewrites history from its checkpoint on: drop records past `step`.
void Trainer::trim_metrics_after(int64_t step) {
  const fs::path p = fs::path(cfg_.out_dir) / "metrics.jsonl";
  if (!fs::exists(p)) return;
  if (step == 0 && !options_.resume) {
    fs::remove(p);
    return;
  }
  std::ifstream in(p);
  std::string line, kept;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() > step) continue;
    if (step == 0 && j.value("type", "") == "eval") continue;  // run() evaluates step 0 again
    kept += line + "\n";
  }
  in.close();
  write_file_atomic(p.string(), kept.data(), kept.size());
}

// ---------------------------------------------------------------------------------------
// Checkpoints: parameters, optimizer moments and balancer state as tensors, named
// "param/<hf name>", "optim.m/<hf name>", "optim.v/<hf name>" (AdamW tensors only),
// "buffer/<hf name>", "balancer.m/<hf name>", "balancer.v/<hf name>".

std::string Trainer::save_checkpoint() {
  if (hooks_.heartbeat) hooks_.heartbeat("checkpoint", step_, 0);
  Timer timer;
  CheckpointWriter w(cfg_.ckpt_dir, step_);
  const ParamTable& P = model_->layout.params;
  const FlatRange own = optimizer_->owned();
  for (const ParamInfo& p : P.params) {
    w.add_f32(kParamsFile, "param/" + p.name, p.shape, 0, p.numel, model_->params.data() + p.offset);
    const size_t b = std::max(p.offset, own.begin), e = std::min(p.offset + p.numel, own.end);
    if (b >= e) continue;
    w.add_f32(kOptimFile, "optim.m/" + p.name, p.shape, b - p.offset, e - b, optimizer_->m().data() + (b - own.begin));
    if (!optimizer_->uses_muon(p))
      w.add_f32(kOptimFile, "optim.v/" + p.name, p.shape, b - p.offset, e - b, optimizer_->v().data() + (b - own.begin));
  }
  for (const ParamInfo& p : model_->layout.buffers.params) {
    w.add_f32(kBuffersFile, "buffer/" + p.name, p.shape, 0, p.numel, model_->buffers.data() + p.offset);
    w.add_f32(kBuffersFile, "balancer.m/" + p.name, p.shape, 0, p.numel, balancer_->m().data() + p.offset);
    w.add_f32(kBuffersFile, "balancer.v/" + p.name, p.shape, 0, p.numel, balancer_->v().data() + p.offset);
  }
  if (fs::exists(cfg_.tokenizer)) w.copy_file(cfg_.tokenizer, "tokenizer.model");
  std::vector<json> pieces = {w.write_files()};  // DP: gathered from every rank
  json header = {
      {"tokens", tokens_},
      {"time", long(std::time(nullptr))},
      {"layout", {{"world", 1}, {"dp", 1}, {"ep", 1}, {"cp", 1}}},
      {"model_config", {{"toml", cfg_.model.to_toml()}, {"hf", cfg_.model.to_hf_json()}}},
      {"run_config", {{"path", cfg_.path}, {"text", cfg_.text}}},
      {"tokenizer", fs::exists(cfg_.tokenizer) ? "tokenizer.model" : ""},
      {"state",
       {{"trainer",
         {{"step", step_}, {"tokens", tokens_}, {"phase", phase_},
          {"rope_theta", model_->cfg().rope_theta},
          {"total_steps", plan_.total_steps()}, {"skipped_steps", skipped_}}},
        {"optimizer", optimizer_->state()},
        {"balancer", balancer_->state()},
        {"loader", loader_->state()},
        // Nothing in the step draws random numbers besides the loader (its own state);
        // the init seed is kept so a reader can rebuild the starting weights.
        {"rng", {{"seed", cfg_.seed}}}}}};
  std::string dir = w.commit(header, pieces);
  prune_checkpoints(cfg_.ckpt_dir, cfg_.keep_last);
  last_saved_ = step_;
  const double s = timer.seconds();
  json j = {{"type", "checkpoint"}, {"step", step_}, {"dir", dir}, {"seconds", s}};
  write_metrics(j);
  if (options_.progress) std::printf("saved %s (%.2f s)\n", dir.c_str(), s);
  return dir;
}

void Trainer::load_checkpoint(const std::string& path) {
  Checkpoint ck(path);
  const json& st = ck.state();
  for (const char* k : {"trainer", "optimizer", "balancer", "loader"})
    ZAYA_CHECK(st.contains(k), "checkpoint ", ck.dir(), ": manifest state has no ", k);
  const ParamTable& P = model_->layout.params;
  const FlatRange own = optimizer_->owned();
  for (const ParamInfo& p : P.params) {
    ck.read("param/" + p.name, model_->params.data() + p.offset, 0, p.numel, p.shape);
    const size_t b = std::max(p.offset, own.begin), e = std::min(p.offset + p.numel, own.end);
    if (b >= e) continue;
    ck.read("optim.m/" + p.name, optimizer_->m().data() + (b - own.begin), b - p.offset, e - b);
    if (!optimizer_->uses_muon(p))
      ck.read("optim.v/" + p.name, optimizer_->v().data() + (b - own.begin), b - p.offset, e - b);
  }
  for (const ParamInfo& p : model_->layout.buffers.params) {
    ck.read("buffer/" + p.name, model_->buffers.data() + p.offset, 0, p.numel, p.shape);
    ck.read("balancer.m/" + p.name, balancer_->m().data() + p.offset, 0, p.numel, p.shape);
    ck.read("balancer.v/" + p.name, balancer_->v().data() + p.offset, 0, p.numel, p.shape);
  }
  optimizer_->load_state(st["optimizer"]);
  balancer_->load_state(st["balancer"]);
  loader_->load_state(st["loader"]);
  step_ = st["trainer"].at("step").get<int64_t>();
  tokens_ = st["trainer"].at("tokens").get<uint64_t>();
  skipped_ = st["trainer"].value("skipped_steps", int64_t(0));
  ZAYA_CHECK(step_ <= plan_.total_steps(), "checkpoint ", ck.dir(), ": step ", step_, " is past this run's ",
             plan_.total_steps(), " planned steps");
  ZAYA_CHECK(step_ == plan_.total_steps() || plan_.at(step_).tokens_before == tokens_, "checkpoint ", ck.dir(),
             ": ", tokens_, " tokens trained at step ", step_, " but the run config's plan says ",
             plan_.at(step_).tokens_before, " (batch, phases or seq_len changed)");
  phase_ = -1;  // the next step re-enters its phase: mixture, seq_len and RoPE base
  last_saved_ = step_;
  log_info("resumed from ", ck.dir(), " at step ", step_, " (", tokens_, " tokens)");
}

}  // namespace zaya
