// WeightStore: the weights an inference model reads, by HF name, as views (dtype, shape,
// pointer) into memory someone else owns: memory-mapped safetensors shards (ckpt/hf_mmap.h)
// or a Model<float>'s flat buffer, or a quantized GGUF file's blocks (quant/blocks.h).
// Nothing is copied; the store keeps its owners alive.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "model/model.h"
#include "quant/blocks.h"

namespace zaya {

// F32/BF16 element arrays, or rows of llama.cpp blocks (a row of K weights is
// K / block blocks; the last dimension of the shape is K).
// F32, BF16, Q8_0, Q4_0, Q4_K or Q6_K of core/dtype.h.
using WeightDType = DType;
quant::QType weight_qtype(WeightDType t);  // fails on a dtype that is no weight format
bool weight_dtype_from_qtype(quant::QType q, WeightDType* out);  // false: no in-place form
// Bytes of `rows` rows of K weights.
size_t weight_bytes(WeightDType t, size_t rows, int64_t K);

struct WeightView {
  WeightDType dtype = WeightDType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::string where;  // file (or "model") for error messages
  size_t numel() const;
  size_t bytes() const;
};

class WeightStore {
 public:
  void add(const std::string& name, WeightView v);
  void keep_alive(std::shared_ptr<void> owner) { owners_.push_back(std::move(owner)); }
  const WeightView* find(const std::string& name) const;
  // The view of `name`, checked against `shape`; fails naming the tensor and its file.
  const WeightView& get(const std::string& name, const std::vector<int64_t>& shape) const;
  const std::unordered_map<std::string, WeightView>& all() const { return views_; }
  std::string origin;  // directory or "model", for messages

  // Views into m's parameter and buffer arrays (fp32; m must outlive the store).
  static WeightStore from_model(const Model<float>& m);

 private:
  std::unordered_map<std::string, WeightView> views_;
  std::vector<std::shared_ptr<void>> owners_;
};

}  // namespace zaya
