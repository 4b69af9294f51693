// HF-format ZAYA directories: config.json plus model.safetensors, or shards listed in
// model.safetensors.index.json ("weight_map": name -> file). Parameters are looked up by
// their HF names in the model's parameter table, so import/export is a loop, not a
// hand-written mapping.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/model.h"

namespace zaya {

// The safetensors files of an HF directory: model.safetensors, or every shard the index lists
// (each once, in index order) with its weight_map (tensor name -> shard path). Errors name the
// index, or the missing shard and a tensor it should hold.
struct HfShardList {
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;  // empty for a single model.safetensors
};
HfShardList hf_shard_list(const std::string& dir);

// Those files opened (memory-mapped, nothing read yet) and every tensor with the file that
// holds it: the index's tensors, each checked to be in its shard, or without an index every
// tensor of model.safetensors.
struct HfShards {
  struct Tensor {
    const SafetensorsFile* file;
    const TensorEntry* entry;
  };
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<Tensor> tensors;
};
HfShards open_hf_shards(const std::string& dir);

// Loads every parameter (and the balancing-bias buffers) of `m` from `dir`. Missing or
// misshapen tensors are errors naming the tensor and file; an absent lm_head.weight means
// tied (as ZAYA1 is); balancing biases absent from the files keep their init values.
template <class T>
void load_hf_weights(const std::string& dir, Model<T>& m);

// Writes config.json, generation_config.json and the weights (one file, or shards of at
// most max_shard_bytes plus the index) through HfWriter (ckpt/hf_writer.h). dtype F32 or
// BF16. Fails, naming the field, on a config the released HF code cannot load
// (Hq != num_attention_heads/2, top-k != 1).
template <class T>
void save_hf_dir(const std::string& dir, const Model<T>& m, DType dtype, size_t max_shard_bytes = 0,
                 bool check_hf_compat = true);

}  // namespace zaya
