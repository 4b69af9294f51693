// The one writer of HF-format ZAYA directories (`zaya ckpt export-hf`, save_hf_dir, the random
// bf16 models of benchmarks): the shard plan, the shard names, model.safetensors.index.json,
// config.json, generation_config.json and the check that the released HF code loads the config.
//
// Tensors come as sources (name, dtype, shape and a callback that produces the bytes), written
// one at a time as their shard is written: a streamed export holds one tensor in memory, an
// in-memory save converts as it goes, and both write the same bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/config.h"

namespace zaya {

// Fails, naming the field, on a config the released HF ZAYA code cannot load
// (Hq != num_attention_heads / 2, top-k != 1).
void check_hf_compatible(const ModelConfig& c);

struct HfTensorSource {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::function<void(uint8_t* dst)> fill;  // writes bytes() bytes
  uint64_t bytes() const;
};

struct HfWriteOptions {
  DType dtype = DType::BF16;      // the weights' dtype (config.json's torch_dtype): F32 or BF16
  uint64_t max_shard_bytes = 0;   // 0: one model.safetensors
  bool check_hf_compat = true;
  bool generation_config = true;  // write generation_config.json
  bool final_newline = false;     // end each JSON file with "\n"
};

struct HfWriteSummary {
  size_t files = 0;         // safetensors files
  uint64_t file_bytes = 0;  // their sizes
  uint64_t data_bytes = 0;  // their tensors' bytes (the index's total_size)
};

class HfWriter {
 public:
  // Checks the dtype and, when asked, that the released HF code loads `cfg`.
  HfWriter(const ModelConfig& cfg, const HfWriteOptions& o);
  void add(HfTensorSource t);
  // Into `dir` (created when absent), each file atomically: the tensors in the order added, a
  // new shard when the next would pass max_shard_bytes (model-00001-of-0000N.safetensors, and
  // the index), or one model.safetensors; then config.json and generation_config.json.
  HfWriteSummary write(const std::string& dir) const;

 private:
  ModelConfig cfg_;
  HfWriteOptions o_;
  std::vector<HfTensorSource> tensors_;
};

}  // namespace zaya
