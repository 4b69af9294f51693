#include "model/split_master.h"

#include <omp.h>

#include <cstring>

#include "core/bf16.h"
#include "core/parallel.h"

namespace zaya {

int SplitMaster::row_of(const ParamInfo& p) {
  const bool product_weight =
      p.role == ParamRole::Matrix || p.role == ParamRole::ExpertMatrix || p.role == ParamRole::Embedding;
  return product_weight && p.shape.size() == 2 ? int(p.shape[1]) : 0;
}

SplitMaster::SplitMaster(const ParamTable& table) {
  for (const ParamInfo& p : table.params) {
    const int row = row_of(p);
    if (!row || !p.numel) continue;
    if (!runs_.empty() && runs_.back().end == p.offset && runs_.back().row == row)
      runs_.back().end += p.numel;
    else
      runs_.push_back({p.offset, p.offset + p.numel, row});
  }
}

void split_row_decode(const float* w, int K, float* out) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(w);
  for (int j = 0; j < K; ++j) out[j] = split_value(h[j], h[K + j]);
}

void split_row_encode(const float* in, int K, float* w) {
  uint16_t* h = reinterpret_cast<uint16_t*>(w);
  for (int j = 0; j < K; ++j) split_store(in[j], h[j], h[K + j]);
}

namespace {
// Every row of every run through f(row pointer, K, scratch of K floats), rows shared out
// over the threads.
template <class F>
void each_row(const std::vector<SplitRun>& runs, float* params, F f) {
#pragma omp parallel
  {
    std::vector<float> tmp;
    for (const SplitRun& r : runs) {
      const size_t rows = (r.end - r.begin) / size_t(r.row);
      tmp.resize(size_t(r.row));
#pragma omp for schedule(static) nowait
      for (size_t i = 0; i < rows; ++i) f(params + r.begin + i * size_t(r.row), r.row, tmp.data());
    }
  }
}
}  // namespace

void SplitMaster::encode(float* params) const {
  each_row(runs_, params, [](float* w, int K, float* tmp) {
    std::memcpy(tmp, w, sizeof(float) * size_t(K));
    split_row_encode(tmp, K, w);
  });
}

void SplitMaster::decode(float* params) const {
  each_row(runs_, params, [](float* w, int K, float* tmp) {
    split_row_decode(w, K, tmp);
    std::memcpy(w, tmp, sizeof(float) * size_t(K));
  });
}

std::vector<Bf16Mirror> SplitMaster::mirrors(const float* params) const {
  std::vector<Bf16Mirror> m;
  m.reserve(runs_.size());
  for (const SplitRun& r : runs_)
    m.push_back({params + r.begin, r.end - r.begin, reinterpret_cast<const bf16*>(params + r.begin), r.row});
  return m;
}

void split_rows_gather(float* out, const int32_t* ids, const float* table, int N, int D) {
  parallel_for(N, [&](int64_t i) { split_row_decode(table + size_t(ids[i]) * D, D, out + size_t(i) * D); });
}

}  // namespace zaya
