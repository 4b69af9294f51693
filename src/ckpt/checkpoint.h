// Training checkpoints: a directory of safetensors files plus a JSON manifest.
//
//   ROOT/step_00000100/manifest.json
//   ROOT/step_00000100/<file>.safetensors ...   (the trainer writes params-r00000, optim-r00000, buffers)
//   ROOT/step_00000100/tokenizer.model          (extra files copied in, when given)
//   ROOT/latest                                 "step_00000100\n"
//
// manifest.json ("format": "zaya.ckpt.v1"):
//   step, tokens, time, layout {world, dp, ep, cp}, model_config {toml, hf}, run_config {path, text},
//   state {optimizer, balancer, loader, rng, trainer, ...}: JSON the trainer owns,
//   files {name: bytes},
//   tensors: [{name, dtype, shape (global), numel,
//              slices: [{file, key, start, numel, byte_begin, byte_end, xxh3}]}]
// A tensor is a named global array (row-major); a slice is the elements [start, start+numel)
// of its flattened form, stored as one safetensors entry `key` in `file` at absolute bytes
// [byte_begin, byte_end), with the XXH3-64 checksum of those bytes (16 hex digits). One
// rank writes whole tensors as one slice each; a ZeRO-1 shard or an expert-parallel rank
// writes the slices it holds, and a reshape re-cuts them, all through the same manifest.
//
// Atomicity: files are written into ROOT/.tmp-step_XXXXXXXX-<pid>, each fsynced, the manifest
// last; the directory is fsynced and renamed to step_XXXXXXXX, ROOT is fsynced, and only then
// is `latest` replaced (write to a temporary name, fsync, rename). A reader following
// `latest` therefore only ever finds complete checkpoints; a crash leaves at worst a
// .tmp-* directory that remove_stale_temporaries() clears.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/model.h"

namespace zaya {

std::string checkpoint_step_name(int64_t step);  // "step_00000100"
uint64_t xxh3_of(const void* data, size_t n);
std::string hex64(uint64_t v);

// Collects the slices of one rank's files, then writes them into the temporary directory.
// Data pointers must stay valid until write_files() returns. Every rank of one save passes
// the same `tag` (default: this process id) so they share one temporary directory.
class CheckpointWriter {
 public:
  CheckpointWriter(std::string root, int64_t step, std::string tag = "");
  const std::string& temp_dir() const { return tmp_; }
  const std::string& final_dir() const { return final_; }

  void add(const std::string& file, const std::string& tensor, DType dtype, std::vector<int64_t> global_shape,
           size_t start, size_t numel, const void* data);
  void add_f32(const std::string& file, const std::string& tensor, std::vector<int64_t> global_shape, size_t start,
               size_t numel, const float* data) {
    add(file, tensor, DType::F32, std::move(global_shape), start, numel, data);
  }
  void copy_file(const std::string& src, const std::string& name);  // e.g. tokenizer.model

  // Writes this writer's files (atomically each) into temp_dir(); returns their manifest
  // pieces {tensors: [...], files: {...}} for commit() (gathered from every rank).
  nlohmann::json write_files();

  // One process only (rank 0), after every rank's write_files(): merges the pieces into the
  // manifest (`header` holds step, state, configs, ...), writes it, renames the directory
  // into place and updates `latest`. Returns the final directory.
  std::string commit(nlohmann::json header, const std::vector<nlohmann::json>& pieces);

 private:
  struct Item {
    std::string tensor;
    DType dtype;
    std::vector<int64_t> shape;
    size_t start, numel;
    const void* data;
  };
  std::string root_, tmp_, final_;
  int64_t step_;
  std::map<std::string, std::vector<Item>> files_;  // file name -> its slices
  std::vector<std::pair<std::string, std::string>> copies_;
};

// Keeps the newest `keep` step_* directories under root (never the one `latest` names).
void prune_checkpoints(const std::string& root, int keep);
// Removes .tmp-step_* directories left by interrupted saves.
void remove_stale_temporaries(const std::string& root);
// Step directories under root, oldest first.
std::vector<std::string> list_checkpoints(const std::string& root);

class Checkpoint {
 public:
  // `path`: a checkpoint directory (has manifest.json) or its manifest.json, a checkpoint root
  // (has `latest`), the `latest` pointer file itself, or a run directory whose ckpt/ holds one.
  // Returns the step directory; fails naming the path when it is none of these.
  static std::string resolve(const std::string& path);
  // Whether `path` looks like one of the forms resolve() takes (any regular file counts; nothing
  // is read): callers that also accept HF directories (which are directories) use it to choose.
  static bool is_checkpoint_path(const std::string& path);
  explicit Checkpoint(const std::string& path);  // resolves, then parses and checks the manifest
  ~Checkpoint();

  const std::string& dir() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  int64_t step() const { return manifest_.at("step").get<int64_t>(); }
  const nlohmann::json& state() const { return manifest_.at("state"); }

  struct Slice {
    std::string file, key;
    size_t start = 0, numel = 0;
    uint64_t byte_begin = 0, byte_end = 0, xxh3 = 0;
  };
  struct Tensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    size_t numel = 0;
    std::vector<Slice> slices;  // sorted by start
  };
  bool has(const std::string& tensor) const { return index_.count(tensor) > 0; }
  const Tensor& tensor(const std::string& name) const;
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // Reads elements [start, start + n) of a tensor as fp32 (n = numel - start when n == npos),
  // checking the checksum of every slice it touches; errors name the file and the tensor.
  static constexpr size_t npos = size_t(-1);
  void read(const std::string& tensor, float* dst, size_t start = 0, size_t n = npos,
            const std::vector<int64_t>& expect_shape = {}) const;
  // Checks every slice's checksum (and that slices tile each tensor); throws on the first fault.
  void verify() const;

 private:
  const SafetensorsFile& file(const std::string& name) const;
  void check_slice(const Tensor& t, const Slice& s) const;
  std::string dir_;
  nlohmann::json manifest_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t> index_;
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  mutable std::map<std::string, bool> verified_;  // "file/key" -> checksum checked
};

// The model a training checkpoint holds: its config (as trained: the run's base RoPE theta;
// the manifest's state.trainer.rope_theta has the one in use at the step), its weights and
// balancing biases, and its tokenizer file ("" when it has none).
ModelConfig checkpoint_model_config(const Checkpoint& ck);
template <class T>
void load_checkpoint_model(const Checkpoint& ck, Model<T>& m);
std::string checkpoint_tokenizer(const Checkpoint& ck);

}  // namespace zaya
