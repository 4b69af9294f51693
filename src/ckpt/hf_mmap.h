// HF-format directories opened for in-place inference: every safetensors file (one, or
// the shards listed in model.safetensors.index.json, opened shard by shard) is memory-mapped
// and its tensors handed to the model floor as views (model/weights.h). bf16 stays bf16.
// A quantized directory (`zaya quantize`: config.json, model.gguf, the tokenizer) opens the
// same way: the GGUF file is mapped and its blocks are the views.
// Also: a writer of full-shape random bf16 HF models (benchmarks, memory tests) that never
// holds more than one shard in memory.
#pragma once
#include <cstdint>
#include <string>

#include "model/weights.h"

namespace zaya {

// Fails naming the file on a missing shard, a tensor the index names but the shard lacks,
// or a dtype other than F32/BF16 (GGUF: F32, BF16, Q8_0, Q4_0, Q4_K, Q6_K), and on a GGUF
// block whose scale is NaN or infinite. populate: map every page now when the files fit in
// memory (decode); false for one pass over the tensors (zaya quantize).
WeightStore open_hf_weights(const std::string& dir, bool populate = true);

// True when the in-place path applies: the directory's floating-point matrices are stored
// as bf16, or it is a quantized directory (model.gguf). Reads the headers only.
bool hf_weights_are_bf16(const std::string& dir);

// The GGUF file of a quantized model directory, and whether the directory has one.
std::string gguf_model_path(const std::string& dir);
bool is_gguf_model_dir(const std::string& dir);

// Writes config.json + shards of at most max_shard_bytes (+ index when more than one), through
// HfWriter (ckpt/hf_writer.h), with random bf16 weights: matrices uniform with std
// cfg.init_std, norms and scales 1, biases 0, balancing biases as init_buffers. Returns the
// tensor bytes written.
uint64_t write_random_hf_bf16(const std::string& dir, const ModelConfig& cfg, uint64_t seed, size_t max_shard_bytes);

}  // namespace zaya
