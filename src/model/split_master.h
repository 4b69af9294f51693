// bf16 training's master weights without a second copy. The products read the weights in
// bf16; the optimizer updates them in fp32. Rather than an fp32 master beside a bf16 copy
// (6 bytes per weight), every tensor a product reads (the Matrix, ExpertMatrix and Embedding
// roles) stores each row of K fp32 values, in place, as the K bf16 values rounded to nearest
// (core/bf16.h split_hi) followed by their K low 16-bit halves (4 bytes per weight). The
// fp32 value comes back bit for bit (split_join), and the products read the bf16 halves as
// a matrix with leading dim 2K (kernels/gemm.h Bf16Mirror::row): the copy costs no memory,
// and no pass but the optimizer's own. Norms, scales, biases and the convolution's weights,
// read elementwise in fp32, stay plain.
//
// Rows never straddle ZeRO-1's cuts (shard_ranges keeps matrices whole and cuts the embedding
// between rows), so the all-gather moves encoded rows as it moves fp32 words.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "model/params.h"

namespace zaya {

// Consecutive split tensors with one row length: flat offsets [begin, end), rows of `row`.
struct SplitRun {
  size_t begin = 0, end = 0;
  int row = 0;
};

class SplitMaster {
 public:
  explicit SplitMaster(const ParamTable& table);
  // The row length of a tensor stored split, or 0 if it is plain fp32.
  static int row_of(const ParamInfo& p);
  const std::vector<SplitRun>& runs() const { return runs_; }
  // In place over every run: plain fp32 -> split, and back.
  void encode(float* params) const;
  void decode(float* params) const;
  // The bf16 halves of every run as the weights' mirrors (for gemm_set_bf16_mirrors).
  std::vector<Bf16Mirror> mirrors(const float* params) const;

 private:
  std::vector<SplitRun> runs_;
};

// The split row `w` (K words) to plain fp32 values, and plain values into a split row.
void split_row_decode(const float* w, int K, float* out);
void split_row_encode(const float* in, int K, float* w);
// Rows of a split table (e.g. the embedding, row length D) gathered as fp32: out[i] = table[ids[i]].
void split_rows_gather(float* out, const int32_t* ids, const float* table, int N, int D);

}  // namespace zaya
