#include "model/weights.h"

#include "core/error.h"

namespace zaya {

quant::QType weight_qtype(WeightDType t) {
  switch (t) {
    case WeightDType::F32: return quant::QType::F32;
    case WeightDType::BF16: return quant::QType::BF16;
    case WeightDType::Q8_0: return quant::QType::Q8_0;
    case WeightDType::Q4_0: return quant::QType::Q4_0;
    case WeightDType::Q4_K: return quant::QType::Q4_K;
    case WeightDType::Q6_K: return quant::QType::Q6_K;
    default: break;
  }
  fail("weights: ", dtype_name(t), " is no weight format (F32, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
}

bool weight_dtype_from_qtype(quant::QType q, WeightDType* out) {
  for (WeightDType t : {WeightDType::F32, WeightDType::BF16, WeightDType::Q8_0, WeightDType::Q4_0, WeightDType::Q4_K,
                        WeightDType::Q6_K})
    if (weight_qtype(t) == q) return *out = t, true;
  return false;
}

size_t weight_bytes(WeightDType t, size_t rows, int64_t K) { return rows * quant::qtype_row_bytes(weight_qtype(t), K); }

size_t WeightView::numel() const {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  return n;
}

size_t WeightView::bytes() const {
  if (shape.empty()) return weight_bytes(dtype, 1, 1);
  const int64_t K = shape.back();
  return K > 0 ? weight_bytes(dtype, numel() / size_t(K), K) : 0;
}

void WeightStore::add(const std::string& name, WeightView v) { views_[name] = std::move(v); }

const WeightView* WeightStore::find(const std::string& name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : &it->second;
}

static std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const WeightView& WeightStore::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const WeightView* v = find(name);
  if (!v) fail(origin, ": missing tensor '", name, "'");
  if (v->shape != shape)
    fail(v->where, ": tensor '", name, "' has shape ", shape_str(v->shape), ", expected ", shape_str(shape));
  return *v;
}

WeightStore WeightStore::from_model(const Model<float>& m) {
  WeightStore s;
  s.origin = "model";
  for (const ParamInfo& p : m.layout.params.params)
    s.add(p.name, WeightView{WeightDType::F32, p.shape, m.params.data() + p.offset, "model"});
  for (const ParamInfo& p : m.layout.buffers.params)
    s.add(p.name, WeightView{WeightDType::F32, p.shape, m.buffers.data() + p.offset, "model"});
  return s;
}

}  // namespace zaya
