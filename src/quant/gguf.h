// GGUF (version 3), the llama.cpp file format: a header, typed key/value metadata, tensor
// infos (name, dims innermost first, ggml type, offset), then the tensor data, each tensor
// at a multiple of general.alignment (default 32) from the start of the data section.
// All integers little-endian; strings are a uint64 length and the bytes.
//   GgufWriter: streams a file tensor by tensor (the infos are written first, so every
//     tensor's size is known up front), through an atomic file (core/io.h): PATH appears
//     only when complete.
//   GgufFile: memory-maps a file and checks every count, type, offset and size against the
//     file before anything is read; any fault is a one-line error naming the file and field.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/io.h"
#include "quant/blocks.h"

namespace zaya::quant {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10, I64 = 11,
  F64 = 12
};
constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kGgufVersion = 3;
constexpr uint32_t kGgufAlignment = 32;

// One metadata value: a scalar (number in u/i/f by its type, or a string), or an array of
// scalars (numbers in nums, strings in strs; arrays of arrays are rejected).
struct GgufValue {
  GgufType type = GgufType::U32;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GgufType elem = GgufType::U32;  // arrays
  std::vector<double> nums;
  std::vector<std::string> strs;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // dims, innermost (the row) first, as ggml orders them
  QType type = QType::F32;
  uint64_t offset = 0;  // from the start of the data section
  size_t bytes = 0;
  const uint8_t* data = nullptr;
};

class GgufWriter {
 public:
  void kv_string(const std::string& k, const std::string& v);
  void kv_u32(const std::string& k, uint32_t v);
  void kv_i32(const std::string& k, int32_t v);
  void kv_u64(const std::string& k, uint64_t v);
  void kv_f32(const std::string& k, float v);
  void kv_bool(const std::string& k, bool v);
  void kv_strings(const std::string& k, const std::vector<std::string>& v);
  void kv_f32s(const std::string& k, const std::vector<float>& v);
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v);
  // ne innermost first. Returns the tensor's byte size.
  size_t add_tensor(const std::string& name, const std::vector<int64_t>& ne, QType t);
  // Writes the header, metadata and infos; then write() the tensors' bytes in the order
  // added, each in one or more pieces (padding goes in between by itself).
  void begin(const std::string& path);
  void write(const void* data, size_t bytes);
  void finish();  // checks every tensor was written; the file appears at path

  uint64_t data_bytes() const { return data_size_; }

 private:
  void key(const std::string& k, GgufType t);
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<GgufTensor> tensors_;
  uint64_t data_size_ = 0;
  std::unique_ptr<AtomicFile> f_;  // from begin() to finish(); destroyed unfinished, nothing appears
  size_t next_ = 0;         // the tensor being written
  uint64_t in_tensor_ = 0;  // its bytes written so far
  uint64_t written_ = 0;    // data section bytes written
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return file_.size(); }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  // Typed getters: fail naming the file and key when absent or of another type.
  std::string get_string(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;  // any unsigned or non-negative signed type
  // Maps every page now, in 2 MB pages where the kernel gives them (MappedFile::populate).
  void populate() const;
  // Drops this mapping's pages of [p, p + n) (a streaming reader that is done with them).
  void release(const void* p, size_t n) const;

 private:
  std::string path_;
  MappedFile file_;
  uint32_t version_ = 0, alignment_ = kGgufAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
};

// GGUF tensor names are at most 63 bytes (llama.cpp's GGML_MAX_NAME); the HF names of a
// ZAYA model run to 70 (model.layers.79.zaya_block.experts.local_experts.15.linear_fc1.weight).
// The file uses short names in llama.cpp's style, mapped one to one:
//   model.embed_tokens.weight -> token_embd.weight, model.final_norm.weight -> output_norm.weight,
//   model.layers.N. -> blk.N., .zaya_block.experts.local_experts.E. -> .ffn_exp.E.,
//   .zaya_block.router. -> .router., .self_attn.qkv. -> .attn_qkv., .self_attn.o_proj. -> .attn_output.
std::string gguf_name_from_hf(const std::string& hf);
std::string hf_name_from_gguf(const std::string& gguf);

}  // namespace zaya::quant
