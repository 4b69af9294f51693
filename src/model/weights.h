// WeightStore: the weights an inference model reads, by HF name, as views (dtype, shape,
// pointer) into memory someone else owns: memory-mapped safetensors shards (ckpt/hf_mmap.h)
// or a Model<float>'s flat buffer. Nothing is copied; the store keeps its owners alive.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"

namespace zaya {

enum class WeightDType { F32, BF16 };
const char* weight_dtype_name(WeightDType t);

struct WeightView {
  WeightDType dtype = WeightDType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::string where;  // file (or "model") for error messages
  size_t numel() const;
  size_t bytes() const { return numel() * (dtype == WeightDType::BF16 ? 2 : 4); }
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
