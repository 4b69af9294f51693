// zaya quantize: an HF ZAYA directory (safetensors, bf16 or fp32) or a training checkpoint
// in, a quantized model directory out: config.json, model.gguf (GGUF v3, architecture
// "zaya", llama.cpp's tensor types and metadata keys, the tokenizer as tokenizer.ggml.*),
// and the tokenizer files themselves.
//
// The mix: every matrix in the chosen type, except the small tensors, kept bf16 (norms,
// residual scales and biases, the router but its down-projection, conv weights; the
// balancing biases f32) and
// the tied embedding / LM head, q8_0 in a q8_0 file and q6_k in q4_k and q4_0 files.
// A row that does not fit the type's block falls back as llama.cpp does (q4_k -> q4_0,
// q6_k -> q8_0, then bf16); the file lists every fallback (zaya.quantize.fallbacks).
// Streaming: one tensor at a time, a few thousand rows per piece, the source pages dropped
// as they are done, so memory stays far below the model's size.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/blocks.h"

namespace zaya {

struct QuantizeProgress {
  size_t tensors_done = 0, tensors = 0;
  uint64_t bytes_done = 0, bytes = 0;  // of the source
  double seconds = 0;
};

struct QuantizeOptions {
  quant::QType type = quant::QType::Q8_0;  // q8_0, q4_0 or q4_k
  // Tensors kept bf16: "lm_head" / "embed" / "token_embd" name the tied embedding; any other
  // entry keeps every tensor whose HF name contains it (e.g. "o_proj", "layers.3.").
  std::vector<std::string> keep;
  std::string tokenizer;  // overrides the source's own (tokenizer.json or a SentencePiece .model)
  bool force = false;     // replace an existing DST
  bool progress = true;   // call on_progress every few seconds
  // The library prints nothing: zaya quantize prints these.
  std::function<void(const QuantizeProgress&)> on_progress;
};

struct QuantizeSummary {
  size_t tensors = 0;
  uint64_t src_bytes = 0, dst_bytes = 0;
  std::vector<std::string> fallbacks;  // "name: q4_k -> q4_0 (row of 128)"
  double seconds = 0;
  size_t peak_rss = 0;
};

QuantizeSummary quantize_model(const std::string& src, const std::string& dst, const QuantizeOptions& o);

// The type a tensor gets in a file of `type` (before fallbacks), by its HF name and role.
quant::QType quantize_tensor_type(const std::string& name, int ndims, bool embedding, bool buffer, quant::QType type,
                                  const std::vector<std::string>& keep);

}  // namespace zaya
