// HF-format directories opened for in-place inference: every safetensors file (one, or
// the shards listed in model.safetensors.index.json, opened shard by shard) is memory-mapped
// and its tensors handed to the model floor as views (model/weights.h). bf16 stays bf16.
// Also: a writer of full-shape random bf16 HF models (benchmarks, memory tests) that never
// holds more than one shard in memory.
#pragma once
#include <cstdint>
#include <string>

#include "model/weights.h"

namespace zaya {

// Fails naming the file on a missing shard, a tensor the index names but the shard lacks,
// or a dtype other than F32/BF16.
WeightStore open_hf_weights(const std::string& dir);

// True when the directory's floating-point matrices are stored as bf16 (reads the headers
// only: the in-place path applies).
bool hf_weights_are_bf16(const std::string& dir);

// Writes config.json + shards of at most max_shard_bytes (+ index when more than one) with
// random bf16 weights: matrices uniform with std cfg.init_std, norms and scales 1, biases 0,
// balancing biases as init_buffers. Returns the bytes written.
uint64_t write_random_hf_bf16(const std::string& dir, const ModelConfig& cfg, uint64_t seed, size_t max_shard_bytes);

}  // namespace zaya
