#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "core/io.h"
#include "core/log.h"
#include "core/timer.h"
#include "kernels/gemm.h"
#include "kernels/loss.h"
#include "parallel/parallelize.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json load_json(const LayerLoad& l) {
  return {{"max_frac", l.max_frac}, {"min_frac", l.min_frac}, {"entropy", l.entropy}, {"skip", l.skip_rate}};
}

}  // namespace

Trainer::Trainer(RunConfig cfg, TrainerOptions opt, TrainerHooks hooks)
    : cfg_(std::move(cfg)), options_(opt), hooks_(std::move(hooks)), plan_(cfg_.plan()) {
  if (cfg_.bf16)
    ZAYA_CHECK(bf16_gemm_supported(), "run config ", cfg_.path,
               ": run.precision = \"bf16\" needs AVX512-BF16 or AMX, which this CPU lacks (use \"fp32\")");
  gemm_settings().precision = cfg_.bf16 ? GemmPrecision::BF16 : GemmPrecision::F32;
  cfg_.resolve_data();

  // The layout: command line over run config; dp = world / (ep * cp).
  comm::init_world();
  comm::set_timeout(cfg_.comm_timeout);
  const int ep = options_.ep > 0 ? options_.ep : cfg_.par_ep, cp = options_.cp > 0 ? options_.cp : cfg_.par_cp;
  groups_ = comm::make_groups(comm::Communicator::world(), 0, ep, cp);
  const comm::Layout& L = groups_.layout;
  root_ = groups_.world.rank() == 0;
  parallel::check_expert_split(cfg_.model, L.ep, cat("run config ", cfg_.path, ": ep = ", L.ep));
  for (const RunPhase& p : cfg_.phases) {
    const std::string phase = cat("run config ", cfg_.path, ": phase ", p.name);
    parallel::check_seq_split(cfg_.model, p.seq_len, L.cp, cat(phase, " seq_len ", p.seq_len));
    parallel::check_batch_split(p.global_batch, L, cat(phase, " global_batch ", p.global_batch));
  }

  // Megatron sources record no vocabulary: their tokens are checked against the model's as read.
  const uint32_t model_vocab = uint32_t(cfg_.model.vocab_size);
  loader_ = std::make_unique<DataLoader>(cfg_.train_sources(), cfg_.seed, false, model_vocab);
  ZAYA_CHECK(int(loader_->vocab_size()) <= cfg_.model.vocab_size, "run config ", cfg_.path, ": the data's vocabulary (",
             loader_->vocab_size(), ") exceeds the model's vocab_size (", cfg_.model.vocab_size, ")");
  for (const DataSource& v : cfg_.val_sources()) {
    val_.push_back(open_token_stream(v, v.name + "/val", model_vocab));
    val_names_.push_back(v.name);
  }

  model_ = std::make_unique<Model<float>>(cfg_.model, parallel::local_experts(cfg_.model, L));
  model_->init(cfg_.seed);
  model_->use_split_master(cfg_.bf16);  // bf16: master weights and their bf16 halves in one array
  const parallel::ParallelSeams seams = parallel::parallelize(*model_, groups_);
  ep_experts_ = seams.experts;
  cp_shard_ = seams.seq_shard;
  model_->reserve(cfg_.micro_batch, cfg_.phases[0].seq_len);
  if (cfg_.balancing.method == BalanceMethod::AuxLoss) model_->set_aux_loss_coeff(cfg_.balancing.aux_coeff);
  parallel::Zero1Settings zs;
  zs.shard = cfg_.zero1;
  zs.bucket_elems = std::max<size_t>(1, size_t(cfg_.bucket_mb * double(1 << 20) / sizeof(float)));
  zero1_ = std::make_unique<parallel::Zero1>(model_->layout.params, groups_, zs);
  optimizer_ = std::make_unique<Optimizer>(model_->layout.params, cfg_.optimizer, zero1_->owned());
  balancer_ = std::make_unique<RouterBalancer>(model_->layout, cfg_.balancing);
  router_health_ = RouterHealthMonitor(cfg_.router_health);

  // Every input is read (data above, checkpoint or init-from weights here) before out_dir is
  // made: a run that fails on bad input leaves nothing behind.
  bool resumed = false;
  if (options_.resume) {
    if (fs::exists(fs::path(cfg_.ckpt_dir) / "latest")) {
      load_checkpoint(cfg_.ckpt_dir);
      resumed = true;
    } else if (root_ && hooks_.report.start) {
      StartRecord rec;
      rec.kind = StartRecord::Kind::FreshStart;
      rec.from = cfg_.ckpt_dir;
      hooks_.report.start(rec);
    }
  }
  if (!resumed && !options_.init_from.empty()) init_weights_from(options_.init_from);
  std::error_code ec;
  fs::create_directories(cfg_.out_dir, ec);
  if (ec) fail("run config ", cfg_.path, ": cannot create out_dir ", cfg_.out_dir, " (", ec.message(), ")");
  fs::create_directories(cfg_.ckpt_dir, ec);
  if (root_) remove_stale_temporaries(cfg_.ckpt_dir);
  groups_.world.barrier();  // nobody writes into ckpt_dir before rank 0 has swept it
  if (options_.metrics && root_) {
    trim_metrics_after(step_);
    metrics_ = std::fopen((fs::path(cfg_.out_dir) / "metrics.jsonl").c_str(), "a");
    ZAYA_CHECK(metrics_, cfg_.out_dir, "/metrics.jsonl: cannot open for appending");
    if (cfg_.tensorboard) tb_ = std::make_unique<TensorBoardWriter>((fs::path(cfg_.out_dir) / "tb").string());
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
  if (root_ && hooks_.report.run_start) {
    RunStartRecord rec;
    rec.name = cfg_.name;
    rec.total_steps = plan_.total_steps();
    rec.stop_step = stop;
    rec.from_step = step_;
    rec.total_tokens = plan_.total_tokens();
    rec.num_phases = plan_.num_phases();
    rec.optimizer = cfg_.optimizer.kind;
    rec.bf16 = cfg_.bf16;
    rec.params = model_->params.size();
    rec.world = groups_.world.size();
    rec.layout = groups_.layout;
    rec.zero1 = cfg_.zero1;
    hooks_.report.run_start(rec);
  }
  if (step_ == 0 && cfg_.eval_interval > 0 && stop > 0) evaluate();
  while (step_ < stop) {
    StepRecord r = train_step();
    if (root_ && hooks_.report.step) hooks_.report.step(r);
    if (hooks_.heartbeat) hooks_.heartbeat("step", step_, r.seconds);
    const bool last = step_ == stop;
    if (cfg_.eval_interval > 0 ? (step_ % cfg_.eval_interval == 0 || last) : last) evaluate();
    finish_save(false);  // completes a background save once every rank has written
    if (cfg_.ckpt_interval > 0 && step_ % cfg_.ckpt_interval == 0) begin_save(cfg_.ckpt_async && step_ != stop);
  }
  finish_save(true);
  if (options_.save_final && last_saved_ != step_) save_checkpoint();
  if (hooks_.heartbeat) hooks_.heartbeat("done", step_, 0);
}

bool Trainer::in_skip_window(int64_t step) const {
  for (const auto& [first, last] : options_.skip_steps)
    if (step >= first && step <= last) return true;
  return false;
}

// Every rank must take the same decision: the most severe verdict wins.
StepVerdict Trainer::agree(StepVerdict v) {
  int64_t code = int64_t(v);
  groups_.world.all_reduce(&code, 1, comm::ReduceOp::Max);
  return StepVerdict(code);
}

StepRecord Trainer::train_step() {
  Timer timer;
  const StepShape shape = plan_.at(step_);
  if (shape.phase != phase_) enter_phase(shape.phase);
  if (hooks_.before_step) hooks_.before_step(step_ + 1);
  const comm::Layout& L = groups_.layout;
  const int T = shape.seq_len, mb = cfg_.micro_batch;
  const int Tl = T / L.cp, t0 = L.cp_rank * Tl;  // context parallel: this rank's positions
  ZAYA_CHECK(shape.global_batch % L.data_world() == 0, "step ", step_ + 1, ": global batch ", shape.global_batch,
             " (batch ramp) is not a multiple of dp * ep = ", L.data_world());
  loader_->next_batch(shape.global_batch, L.data_rank(), L.data_world(), batch_);
  const int local = shape.global_batch / L.data_world(), micro_steps = (local + mb - 1) / mb;
  const double count_all = double(shape.global_batch) * T;  // every target counts (packed windows)

  StepRecord r;
  r.phase = shape.phase;
  r.global_batch = shape.global_batch;
  r.seq_len = T;
  r.lr = cfg_.schedule.at(step_, plan_.total_steps());
  zero1_->stats().clear();
  if (ep_experts_) ep_experts_->comm_seconds = 0;
  if (cp_shard_) cp_shard_->comm_seconds = 0;
  StepVerdict verdict = StepVerdict::Update;
  bool router_abort = false;  // the verdict is a routing-health rollback
  if (in_skip_window(step_ + 1)) {
    // The batch is drawn (the loader moves on) but nothing is trained: every rank alike.
    r.data_skipped = r.skipped = true;
    verdict = StepVerdict::Skip;
    if (root_) log_warn("step ", step_ + 1, ": in a skip window; its data is skipped");
  } else {
    if (micro_steps == 0) model_->zero_grads();  // else the first backward overwrites them
    balancer_->clear_counts();
    double sums[2] = {0, 0};  // loss sum, aux loss sum
    inputs_.resize(size_t(mb) * Tl);
    targets_.resize(size_t(mb) * Tl);
    for (int k = 0; k < micro_steps; ++k) {
      const int rows = std::min(mb, local - k * mb);
      for (int row = 0; row < rows; ++row) {
        const int32_t* seq = batch_.data() + size_t(k * mb + row) * (T + 1) + t0;
        std::copy(seq, seq + Tl, inputs_.begin() + size_t(row) * Tl);
        std::copy(seq + 1, seq + Tl + 1, targets_.begin() + size_t(row) * Tl);
      }
      if (k > 0) model_->mark_bf16_weights_current();  // backward ended it; params did not change
      ForwardResult f = model_->forward(inputs_.data(), targets_.data(), rows, Tl, t0);
      // The last micro-batch's backward hands finished buckets to the reduction as it goes.
      const bool last = k == micro_steps - 1;
      if (last) {
        zero1_->begin(model_->grads.data());
        model_->grads_ready = [this](size_t from) { zero1_->grads_ready(from); };
      }
      // Gradient of the mean over the whole global batch: each rank weights its micro-batch
      // by its share, so the SUM over ranks is the global gradient.
      model_->backward(float(f.count / count_all), k == 0 ? GradMode::Overwrite : GradMode::Accumulate);
      model_->grads_ready = nullptr;
      sums[0] += f.loss_sum;
      sums[1] += f.aux_loss;
      balancer_->add_counts(model_->class_counts(), model_->class_prob_sums());
    }
    zero1_->finish();
    if (hooks_.after_backward) hooks_.after_backward(step_ + 1, model_->grads.data(), model_->grads.size());
    zero1_->all_reduce_sum(sums, 2);
    zero1_->all_reduce_sum(balancer_->counts().data(), balancer_->counts().size());
    r.loss = sums[0] / count_all;
    r.aux_loss = sums[1] / (double(micro_steps) * L.data_world());
    r.grad_norm = zero1_->grad_norm();
    StepCheck check{step_ + 1, r.loss, r.grad_norm, std::isfinite(r.loss) && std::isfinite(r.grad_norm), std::nullopt};
    check.router = judge_routing(step_ + 1);
    router_abort = check.router && check.router->rollback;
    verdict = hooks_.judge ? hooks_.judge(check)
              : !check.finite ? StepVerdict::Skip
              : check.router && check.router->rollback ? StepVerdict::Abort
                                                       : StepVerdict::Update;
    if (groups_.world.size() > 1) verdict = agree(verdict);
    const double scale = clip_factor(r.grad_norm, cfg_.grad_clip);
    r.clipped = scale < 1.0;
    if (verdict == StepVerdict::Update) {
      bf16* p16 = model_->bf16_weights();
      optimizer_->step(model_->params.data(), zero1_->grads(), r.lr, scale, p16, model_->split_master());
      if (zero1_->gather(model_->params.data(), p16)) model_->mark_bf16_weights_current();
      balancer_->update(model_->buffers.data());
    } else {
      // An anomalous step must not poison the weights.
      r.skipped = true;
      ++skipped_;
      if (root_)
        log_warn("step ", step_ + 1, ": ", check.finite ? "anomalous" : "non-finite", " loss ", r.loss,
                 " / gradient norm ", r.grad_norm, "; update skipped (", skipped_, " so far)");
      balancer_->compute_loads();
    }
  }
  ++step_;
  tokens_ += uint64_t(shape.global_batch) * uint64_t(T);
  r.step = step_;
  r.tokens = tokens_;
  r.seconds = timer.seconds();
  r.comm_seconds = zero1_->stats().total() + (ep_experts_ ? ep_experts_->comm_seconds : 0.0) +
                   (cp_shard_ ? cp_shard_->comm_seconds : 0.0);
  r.tokens_per_second = double(shape.global_batch) * T / std::max(r.seconds, 1e-9);
  r.loads = balancer_->loads();
  r.worst_load = balancer_->worst();
  write_metrics(step_json(r));
  if (hooks_.on_step) hooks_.on_step(r);
  if (verdict == StepVerdict::Abort && router_abort)
    throw AnomalyAbort(cat("step ", step_, ": routing collapsed (", router_health_.alarmed(),
                           " MoE layer(s) unhealthy for ", cfg_.router_health.steps,
                           " steps); stopping for a rollback"),
                       step_);
  if (verdict == StepVerdict::Abort)
    throw AnomalyAbort(cat("step ", step_, ": too many consecutive anomalies; stopping for a rollback"), step_);
  return r;
}

// A phase changes the mixture, the sequence length and the RoPE base at its first step.
void Trainer::enter_phase(int phase) {
  const RunPhase& p = cfg_.phases[size_t(phase)];
  loader_->set_phase(p.weights, p.seq_len);
  model_->set_rope_theta(p.rope_theta);
  model_->reserve(cfg_.micro_batch, p.seq_len);
  if (root_ && hooks_.report.phase) {
    PhaseRecord rec;
    rec.phase = phase;
    rec.first = phase_ < 0;
    rec.name = p.name;
    rec.from_step = step_;
    rec.seq_len = p.seq_len;
    rec.global_batch = p.global_batch;
    rec.rope_theta = p.rope_theta;
    hooks_.report.phase(rec);
  }
  phase_ = phase;
}

// Validation windows are dealt out to the data ranks batch by batch and the sums reduced
// over the world. Under expert parallel every rank must run the same number of forwards
// (each one has all-to-alls), so a rank without a batch left runs one with no targets.
EvalRecord Trainer::evaluate() {
  if (hooks_.heartbeat) hooks_.heartbeat("eval", step_, 0);
  EvalRecord e;
  e.step = step_;
  const comm::Layout& L = groups_.layout;
  const int T = cfg_.phases[size_t(std::max(phase_, 0))].seq_len, B = cfg_.eval_batch;
  const int dw = L.data_world(), dr = L.data_rank();
  const int Tl = T / L.cp, t0 = L.cp_rank * Tl;  // context parallel: this rank's positions
  std::vector<int32_t> window(size_t(B) * (T + 1)), in(size_t(B) * Tl), tg(size_t(B) * Tl);
  if (phase_ < 0) model_->set_rope_theta(cfg_.phases[0].rope_theta);
  std::vector<double> sums(val_.size() * 2, 0.0);  // per source: loss sum, target count
  for (size_t s = 0; s < val_.size(); ++s) {
    const uint64_t n = std::min<uint64_t>(uint64_t(cfg_.eval_windows), num_eval_windows(val_[s], T));
    const uint64_t batches = (n + uint64_t(B) - 1) / uint64_t(B);
    const uint64_t rounds = (batches + uint64_t(dw) - 1) / uint64_t(dw);
    for (uint64_t round = 0; round < rounds; ++round) {
      const uint64_t j = round * uint64_t(dw) + uint64_t(dr);
      if (j >= batches && L.ep == 1 && L.cp == 1) break;
      const uint64_t w0 = j * uint64_t(B);
      const int rows = j < batches ? int(std::min<uint64_t>(uint64_t(B), n - w0)) : 1;
      for (int r = 0; r < rows; ++r) {
        eval_window(val_[s], T, j < batches ? w0 + uint64_t(r) : 0, window.data() + size_t(r) * (T + 1));
        const int32_t* seq = window.data() + size_t(r) * (T + 1) + t0;
        std::copy(seq, seq + Tl, in.begin() + size_t(r) * Tl);
        if (j < batches)
          std::copy(seq + 1, seq + Tl + 1, tg.begin() + size_t(r) * Tl);
        else
          std::fill(tg.begin() + size_t(r) * Tl, tg.begin() + size_t(r + 1) * Tl, int32_t(kIgnoreIndex));
      }
      ForwardResult f = model_->forward(in.data(), tg.data(), rows, Tl, t0);
      sums[2 * s] += f.loss_sum;
      sums[2 * s + 1] += f.count;
    }
  }
  if (groups_.world.size() > 1 && !sums.empty()) groups_.world.all_reduce(sums.data(), sums.size());
  double sum_all = 0;
  int64_t count_all = 0;
  for (size_t s = 0; s < val_.size(); ++s) {
    if (sums[2 * s + 1] > 0) e.per_source.push_back({val_names_[s], sums[2 * s] / sums[2 * s + 1]});
    sum_all += sums[2 * s];
    count_all += int64_t(sums[2 * s + 1]);
  }
  e.tokens = count_all;
  e.loss = count_all > 0 ? sum_all / double(count_all) : std::nan("");
  json j = {{"type", "eval"}, {"step", step_}, {"tokens_trained", tokens_}, {"val_loss", e.loss},
            {"val_ppl", std::exp(e.loss)}, {"val_tokens", e.tokens}};
  for (auto& [name, l] : e.per_source) j["sources"][name] = l;
  write_metrics(j);
  if (root_ && hooks_.report.eval) hooks_.report.eval(e);
  if (hooks_.on_eval) hooks_.on_eval(e);
  return e;
}

// ---------------------------------------------------------------------------------------
// Metrics

json Trainer::step_json(const StepRecord& r) const {
  json loads = json::array();
  for (const LayerLoad& l : r.loads) loads.push_back(load_json(l));
  return {{"type", "step"},        {"step", r.step},         {"phase", r.phase},
          {"loss", r.loss},        {"aux_loss", r.aux_loss}, {"lr", r.lr},
          {"grad_norm", r.grad_norm}, {"clipped", r.clipped}, {"skipped", r.skipped},
          {"global_batch", r.global_batch}, {"seq_len", r.seq_len}, {"tokens", r.tokens},
          {"step_s", r.seconds},   {"tokens_per_s", r.tokens_per_second}, {"comm_s", r.comm_seconds},
          {"data_skipped", r.data_skipped},
          {"load", load_json(r.worst_load)}, {"layers", loads}};
}

// Routing health of this step's global-batch loads: a warning and a `router_health` record
// in metrics.jsonl when a layer's streak reaches router_steps and when it recovers. Returns
// the first alarm of the step, for the anomaly handling.
std::optional<RouterAlarm> Trainer::judge_routing(int64_t step) {
  balancer_->compute_loads();
  const RouterHealthEvents ev = router_health_.observe(step, balancer_->loads());
  const RouterHealthSettings& s = cfg_.router_health;
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  for (const RouterAlarm& a : ev.alarms) {
    if (root_)
      log_warn("step ", step, ": MoE layer ", a.layer, " routing unhealthy for ", a.steps, " steps (since step ",
               a.first_step, "): load entropy ", a.entropy, " (min ", s.min_entropy, "), skip share ", a.skip,
               " (max ", s.max_skip, ")", a.rollback ? "; stopping for a rollback" : "");
    write_metrics({{"type", "router_health"}, {"step", step}, {"layer", a.layer}, {"state", "collapsed"},
                   {"since", a.first_step}, {"steps", a.steps}, {"entropy", num(a.entropy)}, {"skip", num(a.skip)},
                   {"min_entropy", s.min_entropy}, {"max_skip", s.max_skip}, {"rollback", a.rollback}});
  }
  for (const RouterAlarm& a : ev.recovered) {
    if (root_)
      log_warn("step ", step, ": MoE layer ", a.layer, " routing healthy again after ", a.steps, " steps (load entropy ",
               a.entropy, ", skip share ", a.skip, ")");
    write_metrics({{"type", "router_health"}, {"step", step}, {"layer", a.layer}, {"state", "recovered"},
                   {"since", a.first_step}, {"steps", a.steps}, {"entropy", num(a.entropy)}, {"skip", num(a.skip)},
                   {"min_entropy", s.min_entropy}, {"max_skip", s.max_skip}, {"rollback", a.rollback}});
  }
  if (ev.alarms.empty()) return std::nullopt;
  return ev.alarms.front();
}

void Trainer::write_metrics(const json& j) {
  if (tb_) tb_->metrics(j);
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

}  // namespace zaya
