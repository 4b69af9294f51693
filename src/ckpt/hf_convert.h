// Checkpoint <-> HF conversion and weight comparison (`zaya ckpt export-hf / import-hf / diff`).
//
// Both directions stream one tensor at a time where the formats allow it, read through
// Checkpoint::read (so any slice layout, e.g. a ZeRO-1 or expert-parallel save, exports the
// same way), and write into a temporary directory next to the destination that is renamed
// into place only when complete: a failure leaves nothing at the destination.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/config.h"

namespace zaya {

// An HF-format directory: config.json plus model.safetensors or shards listed in
// model.safetensors.index.json. Every error names the file and the tensor at fault.
class HfDir {
 public:
  explicit HfDir(const std::string& dir);
  ~HfDir();
  const std::string& dir() const { return dir_; }
  struct Entry {
    const SafetensorsFile* file;
    const TensorEntry* e;
  };
  const std::vector<std::string>& names() const { return names_; }  // in file order
  const Entry* find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> names_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
};

bool is_hf_dir(const std::string& path);  // has config.json

struct ExportHfOptions {
  DType dtype = DType::BF16;              // F32 or BF16 (balancing biases stay F32)
  uint64_t max_shard_bytes = 5000000000;  // 0: one file
  bool force = false;                     // replace a non-empty destination
  bool check_hf_compat = true;
};
// "5GB" (10^9, as HF's max_shard_size), "500MB", "2GiB" (2^30), "123" bytes; 0 or "none": one file.
uint64_t parse_shard_size(const std::string& s);

struct ConvertSummary {
  std::string out;
  size_t tensors = 0, files = 0;
  uint64_t bytes = 0;
  int64_t step = 0;
  bool tokenizer = false;
};

// Checkpoint (a step directory, its root or a run directory) -> HF directory `out`:
// config.json, model.safetensors or shards plus the index, generation_config.json (written by
// HfWriter, ckpt/hf_writer.h, each JSON file ending in a newline) and tokenizer.model when the
// checkpoint has one.
ConvertSummary export_hf(const std::string& ckpt, const std::string& out, const ExportHfOptions& o);

// HF directory -> zaya checkpoint directory `out` (manifest.json, format zaya.ckpt.v1) with
// param/<name> and buffer/<name> tensors, model_config and a state without optimizer or
// loader: train from it with `zaya train --init-from OUT`. Tensors keep their stored dtype
// when F32 or BF16 (no rounding); absent balancing biases get their initial values.
ConvertSummary import_hf(const std::string& hfdir, const std::string& out, bool force);

// Checks an HF directory loads: files and index consistent, every tensor config.json
// implies present with its shape. Returns the number of tensors.
size_t verify_hf_dir(const std::string& hfdir);

// Per-tensor comparison of two weight sets, each a zaya checkpoint or an HF directory,
// matched by HF name (a checkpoint's param/ and buffer/ prefixes are dropped). An element
// that is NaN or infinite on either side is a difference (max_abs = max_rel = inf), even when
// both sides hold the same NaN: two runs that diverged alike are not equal. With nan_equal,
// NaN against NaN and an infinity against the same infinity count as equal.
struct TensorDiff {
  std::string name;
  std::string status;  // "" when compared, else "only in A", "only in B", "shape differs"
  std::vector<int64_t> shape_a, shape_b;
  std::string dtype_a, dtype_b;
  double max_abs = 0, max_rel = 0;  // rel: max over elements of |a-b| / max(|a|, |b|)
  size_t nonfinite_a = 0, nonfinite_b = 0;  // NaN or infinite elements on each side
};
struct DiffResult {
  std::vector<TensorDiff> tensors;
  // Non-weight checkpoint tensors (optimizer moments, ...) the other side lacks: not compared.
  size_t skipped_a = 0, skipped_b = 0;
};
DiffResult diff_weights(const std::string& a, const std::string& b, bool nan_equal = false);

}  // namespace zaya
