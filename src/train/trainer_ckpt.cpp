// Trainer checkpoints: save, resume, init-from.
//
// Tensors (global names, see ckpt/checkpoint.h): "param/<hf name>", "optim.m/<hf name>",
// "optim.v/<hf name>" (AdamW tensors only), "buffer/<hf name>", "balancer.m/<hf name>",
// "balancer.v/<hf name>". Who writes what:
//   params-rNNNNN.safetensors, optim-rNNNNN.safetensors: world rank N's cut of the
//     parameters and optimizer moments (train/ckpt_layout.h: its ZeRO-1 shard, its experts).
//   buffers.safetensors: world rank 0 (balancing biases and their optimizer: replicated).
// Rank 0 gathers every rank's slice list and writes the one manifest. Loading reads each
// rank's needs by global name and element offset, so a checkpoint loads under any DP / EP
// layout (the manifest's layout is informational) and the data loader's state is global.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "train/ckpt_layout.h"
#include "train/trainer.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kBuffersFile = "buffers.safetensors";

// Every rank's string, on every rank (manifest pieces are small).
std::vector<std::string> all_gather_strings(const dist::Communicator& c, const std::string& s) {
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

std::string Trainer::save_checkpoint() {
  if (hooks_.heartbeat) hooks_.heartbeat("checkpoint", step_, 0);
  Timer timer;
  const dist::Layout& L = groups_.layout;
  const int wr = groups_.world.rank();
  // All ranks of one save share one temporary directory, named after rank 0's process.
  int64_t tag = int64_t(::getpid());
  groups_.world.broadcast(&tag, 1, 0);
  CheckpointWriter w(cfg_.ckpt_dir, step_, std::to_string(tag));
  const std::string params_file = rank_file("params", wr), optim_file = rank_file("optim", wr);
  const FlatRange own = zero1_->owned();
  const Optimizer& opt = zero1_->optimizer();
  for (const SliceCut& c : rank_param_cuts(model_->layout.params, own, L, cfg_.zero1)) {
    const ParamInfo& p = *c.p;
    const size_t n = c.end - c.begin;
    w.add_f32(params_file, "param/" + p.name, p.shape, c.begin, n, model_->params.data() + c.flat());
    w.add_f32(optim_file, "optim.m/" + p.name, p.shape, c.begin, n, opt.m().data() + (c.flat() - own.begin));
    if (!opt.uses_muon(p))
      w.add_f32(optim_file, "optim.v/" + p.name, p.shape, c.begin, n, opt.v().data() + (c.flat() - own.begin));
  }
  if (root_) {
    for (const ParamInfo& p : model_->layout.buffers.params) {
      w.add_f32(kBuffersFile, "buffer/" + p.name, p.shape, 0, p.numel, model_->buffers.data() + p.offset);
      w.add_f32(kBuffersFile, "balancer.m/" + p.name, p.shape, 0, p.numel, balancer_->m().data() + p.offset);
      w.add_f32(kBuffersFile, "balancer.v/" + p.name, p.shape, 0, p.numel, balancer_->v().data() + p.offset);
    }
    if (fs::exists(cfg_.tokenizer)) w.copy_file(cfg_.tokenizer, "tokenizer.model");
  }
  // A rank that fails to write throws here; its peers then time out in the gather below
  // (or mpirun ends them), and the temporary directory never becomes a checkpoint.
  const std::vector<std::string> texts = all_gather_strings(groups_.world, w.write_files().dump());
  std::string dir = w.final_dir();
  if (root_) {
    std::vector<json> pieces;
    for (const std::string& t : texts) pieces.push_back(json::parse(t));
    json header = {
        {"tokens", tokens_},
        {"time", long(std::time(nullptr))},
        {"layout", {{"world", groups_.world.size()}, {"dp", L.dp}, {"ep", L.ep}, {"cp", L.cp}, {"zero1", cfg_.zero1}}},
        {"model_config", {{"toml", cfg_.model.to_toml()}, {"hf", cfg_.model.to_hf_json()}}},
        {"run_config", {{"path", cfg_.path}, {"text", cfg_.text}}},
        {"tokenizer", fs::exists(cfg_.tokenizer) ? "tokenizer.model" : ""},
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
    header["state"]["optimizer"].erase("owned");  // per rank; the slices say who held what
    dir = w.commit(header, pieces);
    prune_checkpoints(cfg_.ckpt_dir, cfg_.keep_last);
  }
  groups_.world.barrier();  // `latest` names the new checkpoint before any rank goes on
  last_saved_ = step_;
  const double s = timer.seconds();
  write_metrics({{"type", "checkpoint"}, {"step", step_}, {"dir", dir}, {"seconds", s}});
  if (options_.progress && root_) std::printf("saved %s (%.2f s)\n", dir.c_str(), s);
  if (hooks_.heartbeat) hooks_.heartbeat("checkpoint_done", step_, s);
  if (hooks_.after_checkpoint) hooks_.after_checkpoint(step_, dir);
  return dir;
}

void Trainer::load_checkpoint(const std::string& path) {
  Checkpoint ck(path);
  const json& st = ck.state();
  for (const char* k : {"trainer", "optimizer", "balancer", "loader"})
    ZAYA_CHECK(st.contains(k), "checkpoint ", ck.dir(), ": manifest state has no ", k);
  const FlatRange own = zero1_->owned();
  Optimizer& opt = zero1_->optimizer();
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
  if (root_) {
    const json& lay = ck.manifest().value("layout", json::object());
    const dist::Layout& L = groups_.layout;
    const bool same = lay.value("dp", 1) == L.dp && lay.value("ep", 1) == L.ep && lay.value("cp", 1) == L.cp;
    log_info("resumed from ", ck.dir(), " at step ", step_, " (", tokens_, " tokens)",
             same ? "" : cat("; resharded from dp ", lay.value("dp", 1), " x ep ", lay.value("ep", 1), " x cp ",
                             lay.value("cp", 1), " to dp ", L.dp, " x ep ", L.ep, " x cp ", L.cp));
  }
}

// Weights only: a zaya checkpoint (its params and balancing biases) or an HF directory.
void Trainer::init_weights_from(const std::string& path) {
  const bool is_ckpt = fs::exists(fs::path(path) / "manifest.json") || fs::exists(fs::path(path) / "latest") ||
                       fs::exists(fs::path(path) / "ckpt" / "latest");
  if (is_ckpt) {
    Checkpoint ck(path);
    for (const ParamInfo& p : model_->layout.params.params)
      ck.read("param/" + p.name, model_->params.data() + p.offset, 0, p.numel, p.shape);
    for (const ParamInfo& p : model_->layout.buffers.params)
      if (ck.has("buffer/" + p.name)) ck.read("buffer/" + p.name, model_->buffers.data() + p.offset, 0, p.numel, p.shape);
  } else {
    ZAYA_CHECK(fs::exists(fs::path(path) / "config.json"), "--init-from ", path,
               ": neither a zaya checkpoint (manifest.json / latest) nor an HF directory (config.json)");
    load_hf_weights(path, *model_);
  }
  if (root_)
    log_info("init-from ", path, ": weights", is_ckpt ? " and balancing biases" : "",
             " loaded; optimizer, balancer and data loader state start fresh");
}

}  // namespace zaya
