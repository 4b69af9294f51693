// The run config: one TOML file that says everything a training run does (see
// configs/recipes/*.toml for annotated examples). Strict: an unknown key or a bad value is
// a one-line error naming the file and the field (e.g. "optimizer.lr").
//
//   [run]        name, out_dir, seed, precision ("fp32" | "bf16")
//   [model]      config = "configs/x.toml" (TOML, HF config.json or HF dir); any other key is
//                a model-config field overriding the file's (TOML only), e.g. vocab_size;
//                without `config` the table itself is the whole model config
//   [data]       tokenizer (default: <first source dir>/tokenizer.model);
//                [[data.sources]] name, format ("zaya" | "megatron", default "zaya"); zaya:
//                dir (a `zaya prepare` output) or train = [...], val = [...] shard lists;
//                megatron: prefix (PREFIX.bin + PREFIX.idx), val_prefix (optional)
//   [[phases]]   name, tokens, seq_len, rope_theta, mixture = {source = weight, ...},
//                global_batch (default batch.global_batch)
//   [batch]      global_batch, micro_batch, accumulation (optional check),
//                ramp_start_fraction, ramp_tokens
//   [optimizer]  kind ("adamw" | "muon"), lr, beta1, beta2, eps, weight_decay, grad_clip,
//                decay_embeddings, router_lr_scale; [optimizer.muon] momentum, nesterov, ns_steps, rms_scale
//   [schedule]   kind ("constant" | "cosine" | "wsd"), warmup_steps, min_lr_ratio, decay_fraction
//   [balancing]  method ("bias_adamw" | "bias_sign" | "aux_loss" | "none"), lr, beta1, beta2,
//                eps, weight_decay, sign_rate, aux_coeff, include_skip, follow_mean
//   [anomaly]    router_min_entropy, router_max_skip, router_steps, router_rollback (routing
//                health, train/router_health.h)
//   [eval]       interval (steps, 0: only at the end), windows (validation windows), batch,
//                tasks (zaya eval task names or .json task files), data_dir, tasks_interval,
//                tasks_limit
//   [checkpoint] interval (steps, 0: only at the end), keep_last, dir (default out_dir/ckpt),
//                async (default true: the step only waits for a host snapshot)
//   [log]        interval (progress line every N steps), tensorboard (event files in out_dir/tb)
//   [parallel]   ep, cp (expert / context parallel degrees; dp = world / (ep * cp)),
//                zero1 (shard the optimizer state over DP, default true), bucket_mb
//                (gradient reduce-scatter bucket, MiB of fp32), comm_timeout (seconds)
//
// Relative paths are relative to the working directory.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/balancer.h"
#include "train/router_health.h"
#include "data/loader.h"
#include "train/optim.h"
#include "train/schedule.h"

namespace zaya {

struct RunSource {
  std::string name;
  std::string dir;                      // a `zaya prepare` output (read by resolve_data())
  std::vector<std::string> train, val;  // shard paths
  bool megatron = false;                // format = "megatron": a Megatron-LM indexed dataset
  std::string prefix, val_prefix;       // its train and validation PREFIX (.bin + .idx)
};

struct RunPhase {
  std::string name;
  uint64_t tokens = 0;
  int seq_len = 0;
  double rope_theta = 10000.0;
  std::vector<double> weights;  // one per data source, in [[data.sources]] order
  int global_batch = 0;
};

struct RunConfig {
  std::string path;  // the file it came from (errors, manifest)
  std::string text;  // its text, stored in checkpoints

  std::string name = "run";
  std::string out_dir = "runs/run";
  uint64_t seed = 1234;
  bool bf16 = false;

  std::string model_path;  // empty: inline
  ModelConfig model;

  std::string tokenizer;
  std::vector<RunSource> sources;
  std::vector<RunPhase> phases;

  int global_batch = 0, micro_batch = 0;
  BatchRamp ramp;

  OptimizerSettings optimizer;
  double peak_lr = 3e-4;
  double grad_clip = 1.0;
  LrSchedule schedule;

  BalancerSettings balancing;
  RouterHealthSettings router_health;

  int64_t eval_interval = 0;
  int eval_windows = 16, eval_batch = 8;
  // Downstream tasks (zaya eval's) run at validation evals: built-in names (data in
  // eval_data_dir) or task files (*.json); every eval_tasks_interval steps (0: every eval).
  std::vector<std::string> eval_tasks;
  std::string eval_data_dir;
  int64_t eval_tasks_interval = 0;
  int eval_tasks_limit = 0;  // documents per task (0: all)
  int64_t ckpt_interval = 0;
  int keep_last = 3;
  bool ckpt_async = true;  // snapshot, then write in the background while training goes on
  std::string ckpt_dir;
  int64_t log_interval = 1;
  bool tensorboard = false;  // TensorBoard event files in out_dir/tb (train/tensorboard.h)

  int par_ep = 1, par_cp = 1;
  bool zero1 = true;
  double bucket_mb = 4.0;
  double comm_timeout = 300.0;

  // Fills the train/val shard lists of sources given by `dir` from its meta.json, or their
  // Megatron prefixes when `zaya prepare --output-format megatron` made it (the Trainer
  // calls it; parsing alone never touches the data, so recipes parse anywhere).
  void resolve_data();
  std::vector<DataSource> train_sources() const;
  // The validation data of each source that has some, named as the source.
  std::vector<DataSource> val_sources() const;
  TrainPlan plan(int dp_world = 1) const;  // batch multiple = micro_batch * dp_world
};

RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const std::string& text, const std::string& path);

}  // namespace zaya
