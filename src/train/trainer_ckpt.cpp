// Trainer checkpoints: save, resume, init-from.
//
// Tensors (global names, see ckpt/checkpoint.h): "param/<hf name>", "optim.m/<hf name>",
// "optim.v/<hf name>" (AdamW tensors only), "buffer/<hf name>", "balancer.m/<hf name>",
// "balancer.v/<hf name>". Who writes what:
//   params-rNNNNN.safetensors, optim-rNNNNN.safetensors: world rank N's cut of the
//     parameters and optimizer moments (parallel/ckpt_layout.h: its ZeRO-1 shard, its experts).
//   buffers.safetensors: world rank 0 (balancing biases and their optimizer: replicated).
// Rank 0 gathers every rank's slice list and writes the one manifest. Loading reads each
// rank's needs by global name and element offset, so a checkpoint loads under any DP / EP
// layout (the manifest's layout is informational) and the data loader's state is global.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/tokenizer_files.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "parallel/ckpt_layout.h"
#include "train/trainer.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kBuffersFile = "buffers.safetensors";

// Every rank's string, on every rank (manifest pieces are small).
std::vector<std::string> all_gather_strings(const comm::Communicator& c, const std::string& s) {
  if (c.size() == 1) return {s};
  std::vector<int64_t> len(size_t(c.size()), 0);
  len[size_t(c.rank())] = int64_t(s.size());
  c.all_reduce(len.data(), len.size());
  std::vector<size_t> counts(len.size()), displs(len.size());
  size_t total = 0;
  for (size_t r = 0; r < len.size(); ++r) counts[r] = size_t(len[r]), displs[r] = total, total += counts[r];
  std::vector<uint8_t> buf(std::max<size_t>(total, 1));
  std::memcpy(buf.data() + displs[size_t(c.rank())], s.data(), s.size());
  c.all_gatherv(buf.data(), counts, displs);
  std::vector<std::string> out;
  for (size_t r = 0; r < len.size(); ++r) out.emplace_back(reinterpret_cast<const char*>(buf.data()) + displs[r], counts[r]);
  return out;
}

}  // namespace

// A save in flight: what the step snapshotted, the writer, and the background thread.
struct Trainer::PendingSave {
  int64_t step = 0;
  std::unique_ptr<CheckpointWriter> writer;
  std::deque<std::vector<float>> snapshot;  // host copies the writer reads from
  json header;                              // rank 0: manifest header as of the step
  std::thread thread;
  std::atomic<bool> done{false};
  std::string error;  // this rank's write failure ("" when none)
  json piece;         // this rank's slices, for the manifest
  bool async = false;
  double write_s = 0;  // the writer's own time
  double stall_s = 0;  // the step's wait: the snapshot (plus the write itself when synchronous)
};

void Trainer::PendingSaveDeleter::operator()(PendingSave* p) const {
  if (p && p->thread.joinable()) p->thread.join();
  delete p;
}

// Snapshot (the only part the step waits for), then write: in a background thread when
// async, else here. finish_save() completes it on every rank: agree that every rank wrote
// its files, gather the slice lists, rank 0 writes the manifest and moves it into place.
void Trainer::begin_save(bool async) {
  finish_save(true);  // one save at a time
  if (hooks_.heartbeat) hooks_.heartbeat("checkpoint", step_, 0);
  Timer timer;
  const comm::Layout& L = groups_.layout;
  const int wr = groups_.world.rank();
  auto ps = std::unique_ptr<PendingSave, PendingSaveDeleter>(new PendingSave);
  ps->step = step_;
  model_->plain_master();  // the snapshot copies plain fp32 weights
  // All ranks of one save share one temporary directory, named after rank 0's process.
  int64_t tag = int64_t(::getpid());
  groups_.world.broadcast(&tag, 1, 0);
  ps->writer = std::make_unique<CheckpointWriter>(cfg_.ckpt_dir, step_, std::to_string(tag));
  CheckpointWriter& w = *ps->writer;
  auto add = [&](const std::string& file, const std::string& name, const std::vector<int64_t>& shape, size_t start,
                 size_t n, const float* src) {
    ps->snapshot.emplace_back(src, src + n);
    w.add_f32(file, name, shape, start, n, ps->snapshot.back().data());
  };
  const std::string params_file = parallel::rank_file("params", wr), optim_file = parallel::rank_file("optim", wr);
  const FlatRange own = zero1_->owned();
  const Optimizer& opt = *optimizer_;
  for (const parallel::SliceCut& c : parallel::rank_param_cuts(model_->layout.params, own, L, cfg_.zero1)) {
    const ParamInfo& p = *c.p;
    const size_t n = c.end - c.begin;
    add(params_file, "param/" + p.name, p.shape, c.begin, n, model_->params.data() + c.flat());
    add(optim_file, "optim.m/" + p.name, p.shape, c.begin, n, opt.m().data() + (c.flat() - own.begin));
    if (!opt.uses_muon(p))
      add(optim_file, "optim.v/" + p.name, p.shape, c.begin, n, opt.v().data() + (c.flat() - own.begin));
  }
  if (root_) {
    for (const ParamInfo& p : model_->layout.buffers.params) {
      add(kBuffersFile, "buffer/" + p.name, p.shape, 0, p.numel, model_->buffers.data() + p.offset);
      add(kBuffersFile, "balancer.m/" + p.name, p.shape, 0, p.numel, balancer_->m().data() + p.offset);
      add(kBuffersFile, "balancer.v/" + p.name, p.shape, 0, p.numel, balancer_->v().data() + p.offset);
      add(kBuffersFile, "balancer.p/" + p.name, p.shape, 0, p.numel, balancer_->p().data() + p.offset);
    }
    std::string tokenizer;  // its name in the checkpoint
    if (fs::exists(cfg_.tokenizer))
      for (const auto& [src, name] : tokenizer_files(cfg_.tokenizer)) {
        w.copy_file(src, name);
        if (tokenizer.empty()) tokenizer = name;
      }
    ps->header = {
        {"tokens", tokens_},
        {"time", long(std::time(nullptr))},
        {"layout", {{"world", groups_.world.size()}, {"dp", L.dp}, {"ep", L.ep}, {"cp", L.cp}, {"zero1", cfg_.zero1}}},
        {"model_config", {{"toml", cfg_.model.to_toml()}, {"hf", cfg_.model.to_hf_json()}}},
        {"run_config", {{"path", cfg_.path}, {"text", cfg_.text}}},
        {"tokenizer", tokenizer},
        {"state",
         {{"trainer",
           {{"step", step_}, {"tokens", tokens_}, {"phase", phase_},
            {"rope_theta", model_->cfg().rope_theta},
            {"total_steps", plan_.total_steps()}, {"skipped_steps", skipped_}}},
          {"optimizer", opt.state()},
          {"balancer", balancer_->state()},
          {"loader", loader_->state()},
          // Nothing in the step draws random numbers besides the loader (its own state);
          // the init seed is kept so a reader can rebuild the starting weights.
          {"rng", {{"seed", cfg_.seed}}}}}};
    ps->header["state"]["optimizer"].erase("owned");  // per rank; the slices say who held what
  }
  PendingSave* raw = ps.get();
  auto write = [raw] {
    Timer t;
    try {
      raw->piece = raw->writer->write_files();
    } catch (const std::exception& e) {
      raw->error = e.what();
    }
    raw->write_s = t.seconds();
    raw->done = true;
  };
  ps->async = async;
  pending_ = std::move(ps);
  if (async) {
    raw->stall_s = timer.seconds();
    raw->thread = std::thread(write);
  } else {
    write();
    raw->stall_s = timer.seconds();
  }
}

// wait: block until this rank's writer is done; otherwise complete only when every rank's
// writer is done (one all-reduce per call while a save is in flight). Returns true when the
// save was completed (or failed) here.
bool Trainer::finish_save(bool wait, bool throw_on_failure) {
  if (!pending_) return false;
  PendingSave& ps = *pending_;
  int64_t ready = wait || ps.done ? 1 : 0;
  if (!wait && groups_.world.size() > 1) groups_.world.all_reduce(&ready, 1, comm::ReduceOp::Min);
  if (!ready) return false;
  Timer timer;
  if (ps.thread.joinable()) ps.thread.join();
  const double write_s = ps.write_s;
  // Every rank learns whether any rank failed; then none of them commits.
  int64_t failed = ps.error.empty() ? 0 : 1;
  if (groups_.world.size() > 1) groups_.world.all_reduce(&failed, 1, comm::ReduceOp::Max);
  std::string dir = ps.writer->final_dir();
  if (failed) {
    if (!ps.error.empty()) log_warn("checkpoint at step ", ps.step, " failed on rank ", groups_.world.rank(), ": ", ps.error);
    groups_.world.barrier();
    std::error_code ec;
    if (root_) fs::remove_all(ps.writer->temp_dir(), ec);  // `latest` still names the previous one
    write_metrics({{"type", "checkpoint_failed"}, {"step", ps.step}, {"error", ps.error}});
    const int64_t step = ps.step;
    pending_.reset();
    if (throw_on_failure)
      fail("the checkpoint at step ", step, " could not be written; the last complete one is still `latest`");
    return true;
  }
  const std::vector<std::string> texts = all_gather_strings(groups_.world, ps.piece.dump());
  if (root_) {
    std::vector<json> pieces;
    for (const std::string& t : texts) pieces.push_back(json::parse(t));
    dir = ps.writer->commit(ps.header, pieces);
    prune_checkpoints(cfg_.ckpt_dir, cfg_.keep_last);
  }
  groups_.world.barrier();  // `latest` names the new checkpoint before any rank goes on
  last_saved_ = ps.step;
  // What training waited for: the snapshot (and the write when synchronous), the manifest
  // commit, and, when it had to wait for the background writer, that wait.
  const double stall = ps.stall_s + timer.seconds();
  write_metrics({{"type", "checkpoint"}, {"step", ps.step}, {"dir", dir}, {"stall_s", stall}, {"write_s", write_s}});
  if (root_ && hooks_.report.checkpoint) hooks_.report.checkpoint({ps.step, dir, stall, write_s, ps.async});
  const int64_t step = ps.step;
  pending_.reset();
  if (hooks_.heartbeat) hooks_.heartbeat("checkpoint_done", step, write_s);
  if (hooks_.after_checkpoint) hooks_.after_checkpoint(step, dir);
  return true;
}

std::string Trainer::save_checkpoint() {
  begin_save(false);
  const std::string dir = pending_->writer->final_dir();
  finish_save(true, true);
  return dir;
}

void Trainer::load_checkpoint(const std::string& path) {
  Checkpoint ck(path);
  const json& st = ck.state();
  for (const char* k : {"trainer", "optimizer", "balancer", "loader"})
    ZAYA_CHECK(st.contains(k), "checkpoint ", ck.dir(), ": manifest state has no ", k);
  const FlatRange own = zero1_->owned();
  Optimizer& opt = *optimizer_;
  model_->invalidate_bf16_weights();
  for (const ParamInfo& p : model_->layout.params.params) {
    ck.read("param/" + p.name, model_->params.data() + p.offset, 0, p.numel, p.shape);
    const size_t b = std::max(p.offset, own.begin), e = std::min(p.offset + p.numel, own.end);
    if (b >= e) continue;
    ck.read("optim.m/" + p.name, opt.m().data() + (b - own.begin), b - p.offset, e - b);
    if (!opt.uses_muon(p)) ck.read("optim.v/" + p.name, opt.v().data() + (b - own.begin), b - p.offset, e - b);
  }
  for (const ParamInfo& p : model_->layout.buffers.params) {
    ck.read("buffer/" + p.name, model_->buffers.data() + p.offset, 0, p.numel, p.shape);
    ck.read("balancer.m/" + p.name, balancer_->m().data() + p.offset, 0, p.numel, p.shape);
    ck.read("balancer.v/" + p.name, balancer_->v().data() + p.offset, 0, p.numel, p.shape);
    if (ck.has("balancer.p/" + p.name))
      ck.read("balancer.p/" + p.name, balancer_->p().data() + p.offset, 0, p.numel, p.shape);
    else  // an older checkpoint: follow_mean takes its next means as the reference
      std::fill_n(balancer_->p().begin() + ptrdiff_t(p.offset), p.numel, -1.f);
  }
  opt.load_state(st["optimizer"]);
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
  if (root_ && hooks_.report.start) {
    const json& lay = ck.manifest().value("layout", json::object());
    StartRecord rec;
    rec.kind = StartRecord::Kind::Resumed;
    rec.from = ck.dir();
    rec.step = step_;
    rec.tokens = tokens_;
    rec.saved_dp = lay.value("dp", 1);
    rec.saved_ep = lay.value("ep", 1);
    rec.saved_cp = lay.value("cp", 1);
    rec.layout = groups_.layout;
    hooks_.report.start(rec);
  }
}

// Weights only: a zaya checkpoint (its params and balancing biases) or an HF directory.
void Trainer::init_weights_from(const std::string& path) {
  const bool is_ckpt = Checkpoint::is_checkpoint_path(path);
  if (is_ckpt) {
    Checkpoint ck(path);
    for (const ParamInfo& p : model_->layout.params.params)
      ck.read("param/" + p.name, model_->params.data() + p.offset, 0, p.numel, p.shape);
    model_->invalidate_bf16_weights();
    for (const ParamInfo& p : model_->layout.buffers.params)
      if (ck.has("buffer/" + p.name)) ck.read("buffer/" + p.name, model_->buffers.data() + p.offset, 0, p.numel, p.shape);
  } else {
    ZAYA_CHECK(fs::exists(fs::path(path) / "config.json"), "--init-from ", path,
               ": neither a zaya checkpoint (manifest.json / latest) nor an HF directory (config.json)");
    load_hf_weights(path, *model_);
    model_->invalidate_bf16_weights();
  }
  if (root_ && hooks_.report.start) {
    StartRecord rec;
    rec.kind = StartRecord::Kind::InitFrom;
    rec.from = path;
    rec.with_biases = is_ckpt;
    hooks_.report.start(rec);
  }
}

}  // namespace zaya
