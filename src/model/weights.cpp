#include "model/weights.h"

#include "core/error.h"

namespace zaya {

const char* weight_dtype_name(WeightDType t) { return t == WeightDType::BF16 ? "BF16" : "F32"; }

size_t WeightView::numel() const {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  return n;
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
