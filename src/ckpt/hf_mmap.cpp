#include "ckpt/hf_mmap.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "ckpt/hf.h"
#include "ckpt/hf_writer.h"
#include "ckpt/safetensors.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "quant/gguf.h"

namespace zaya {
namespace fs = std::filesystem;

namespace {


// Views of a quantized directory's model.gguf, under their HF names. Every block scale is
// checked finite (a NaN scale would turn every logit into NaN far from its cause).
WeightStore open_gguf_weights(const std::string& dir, bool populate) {
  const std::string path = gguf_model_path(dir);
  auto file = std::make_shared<quant::GgufFile>(path);
  const std::string arch = file->get_string("general.architecture");
  if (arch != "zaya") fail(path, ": general.architecture is '", arch, "', expected 'zaya'");
  WeightStore s;
  s.origin = dir;
  for (const quant::GgufTensor& t : file->tensors()) {
    WeightDType dt;
    if (!weight_dtype_from_qtype(t.type, &dt))
      fail(path, ": tensor '", t.name, "' is ", quant::qtype_name(uint32_t(t.type)),
           "; the in-place path reads f32, bf16, q8_0, q4_0, q4_k and q6_k");
    const std::string name = quant::hf_name_from_gguf(t.name);
    if (s.find(name)) fail(path, ": tensor '", t.name, "' appears twice");
    s.add(name, WeightView{dt, std::vector<int64_t>(t.ne.rbegin(), t.ne.rend()), t.data, path});
  }
  // (MemAvailable unknown reads 0: then nothing is populated)
  if (populate && file->file_size() + (size_t(1) << 30) < meminfo_bytes("MemAvailable")) file->populate();
  const auto& ts = file->tensors();
  std::vector<std::string> bad(ts.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < ts.size(); ++i) {
    const quant::GgufTensor& t = ts[i];
    if (!quant::qtype_is_quantized(t.type)) continue;
    const size_t rb = quant::qtype_row_bytes(t.type, t.ne[0]), rows = t.bytes / rb;
    for (size_t r = 0; r < rows; ++r)
      if (const int64_t b = quant::first_bad_scale(t.type, t.data + r * rb, t.ne[0]); b >= 0) {
        bad[i] = cat(path, ": tensor '", t.name, "' (", quant::qtype_name(uint32_t(t.type)), ") row ", r, " block ", b,
                     " has a NaN or infinite scale");
        break;
      }
  }
  for (const std::string& b : bad)
    if (!b.empty()) fail(b);
  s.keep_alive(file);
  return s;
}

}  // namespace

std::string gguf_model_path(const std::string& dir) { return (fs::path(dir) / "model.gguf").string(); }
bool is_gguf_model_dir(const std::string& dir) { return fs::exists(gguf_model_path(dir)); }

WeightStore open_hf_weights(const std::string& dir, bool populate) {
  if (is_gguf_model_dir(dir)) return open_gguf_weights(dir, populate);
  WeightStore s;
  s.origin = dir;
  const HfShardList list = hf_shard_list(dir);
  std::vector<std::shared_ptr<SafetensorsFile>> files;
  size_t total = 0;
  for (const std::string& path : list.files) {
    auto file = std::make_shared<SafetensorsFile>(path);  // mmap: no bytes read yet
    for (const TensorEntry& e : file->tensors()) {
      WeightDType dt;
      if (e.dtype == DType::BF16)
        dt = WeightDType::BF16;
      else if (e.dtype == DType::F32)
        dt = WeightDType::F32;
      else
        fail(path, ": tensor '", e.name, "' is ", dtype_name(e.dtype),
             "; the in-place path reads F32 or BF16 (use the fp32 path)");
      if (const WeightView* other = s.find(e.name))
        fail(path, ": tensor ", quote_name(e.name), " is also in ", other->where);
      s.add(e.name, WeightView{dt, e.shape, file->data(e), path});
    }
    s.keep_alive(file);
    files.push_back(file);
    total += file->file_size();
  }
  // Decode reads a different expert's pages at almost every token: left to fault in on
  // first touch (4 KB at a time), a token spends most of its time in page faults. When the
  // files fit in memory with 1 GiB to spare (MemAvailable counts the page cache that may
  // already hold them), map every page at load (shard by shard).
  if (populate && total + (size_t(1) << 30) < meminfo_bytes("MemAvailable"))
    for (const auto& f : files) f->populate();
  for (auto& [name, path] : list.weight_map)
    if (const WeightView* v = s.find(name); !v || v->where != path)
      fail(path, ": the index says it holds ", quote_name(name), " but it does not");
  return s;
}

bool hf_weights_are_bf16(const std::string& dir) {
  if (is_gguf_model_dir(dir)) return true;
  for (const std::string& path : hf_shard_list(dir).files) {
    SafetensorsFile f(path);
    for (const TensorEntry& e : f.tensors())
      if (e.shape.size() == 2) return e.dtype == DType::BF16;
  }
  return false;
}

uint64_t write_random_hf_bf16(const std::string& dir, const ModelConfig& cfg, uint64_t seed, size_t max_shard_bytes) {
  const ModelLayout L = build_layout(cfg);
  std::vector<float> bufs(L.buffers.total);
  init_buffers(L, bufs.data());
  HfWriteOptions o;
  o.max_shard_bytes = max_shard_bytes;
  o.check_hf_compat = false;
  o.generation_config = false;
  HfWriter w(cfg, o);
  const float a = float(cfg.init_std * std::sqrt(3.0)) / 32768.f;
  for (const ParamInfo& p : L.params.params)
    w.add({p.name, DType::BF16, p.shape, [pp = &p, seed, a](uint8_t* dst) {
             const ParamInfo& p = *pp;
             bf16* d = reinterpret_cast<bf16*>(dst);
             const bool one = p.role == ParamRole::Norm || p.role == ParamRole::Scale;
             const bool zero = p.role == ParamRole::Bias;
             const uint64_t key = hash_name(p.name);
             const int64_t n = int64_t(p.numel);
             // Uniform with standard deviation init_std: cheap enough for billions of values.
#pragma omp parallel for schedule(static)
             for (int64_t i = 0; i < n; i += 4096) {
               Philox r(seed, key ^ uint64_t(i));
               for (int64_t k = i; k < std::min(n, i + 4096); k += 4) {
                 const uint64_t u = r.next_u64();
                 for (int64_t j = k; j < std::min(n, k + 4); ++j) {
                   const float v = float(int(uint16_t(u >> (16 * (j - k)))) - 32768) * a;
                   d[j] = to_bf16(one ? 1.f : zero ? 0.f : v);
                 }
               }
             }
           }});
  for (const ParamInfo& p : L.buffers.params)
    w.add({p.name, DType::F32, p.shape,
           [src = bufs.data() + p.offset, n = p.numel](uint8_t* dst) { std::memcpy(dst, src, n * 4); }});
  return w.write(dir).data_bytes;
}

}  // namespace zaya
