// safetensors: 8-byte little-endian header length N, a JSON header of N bytes
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}), then
// the tensor bytes, contiguous. The reader memory-maps the file and validates it as the
// reference implementation (huggingface/safetensors) does: the header fits in the file (and
// in 100 MB), is a JSON object of objects with no name twice, `__metadata__` holds only
// strings, shapes are non-negative integers whose product does not overflow, each tensor's
// byte length is its dtype size times that product, and the offsets tile the data section
// exactly (no gap, no overlap, nothing after the last tensor). Every error is one line
// naming the file and the tensor or field at fault.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/io.h"

namespace zaya {

// The dtypes a safetensors file may hold (core/dtype.h's F64 ... BOOL without U64/U32); fails
// naming `where` on any other.
DType parse_dtype(const std::string& s, const std::string& where);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section
  size_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws zaya::Error
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&& o) noexcept = default;

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;
  const uint8_t* data(const TensorEntry& e) const { return data_ + e.begin; }
  size_t file_size() const { return file_.size(); }
  // Maps every page of the file now, in 2 MB pages where it can (MappedFile::populate: a
  // file cached in 4 KB pages is read again; views stay valid). Returns false if it could not.
  bool populate(bool always_reread = false) const;
  // Reads a tensor as float/double, converting from F64/F32/F16/BF16, after checking its
  // shape equals `expect_shape` (when non-empty).
  void read(const std::string& name, float* dst, const std::vector<int64_t>& expect_shape = {}) const;
  void read(const std::string& name, double* dst, const std::vector<int64_t>& expect_shape = {}) const;

 private:
  template <class T>
  void read_impl(const std::string& name, T* dst, const std::vector<int64_t>& expect_shape) const;
  void parse_header(const std::string& path);  // from the mapping: header, entries, index
  std::string path_;
  MappedFile file_;
  const uint8_t* data_ = nullptr;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Collects tensors and writes one safetensors file atomically (core/io.h write_file_atomic):
// a reader never sees a half file.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes);
  // Converts from float/double to the stored dtype (F64, F32 or BF16).
  void add_float(const std::string& name, DType dtype, std::vector<int64_t> shape, const float* data);
  void add_double(const std::string& name, DType dtype, std::vector<int64_t> shape, const double* data);
  void set_metadata(const std::string& k, const std::string& v) { metadata_[k] = v; }
  size_t data_bytes() const { return offset_; }
  void write(const std::string& path) const;

 private:
  struct Item {
    TensorEntry e;
    std::vector<uint8_t> owned;
    const void* ptr = nullptr;
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
  uint64_t offset_ = 0;
};

// The bytes before a file's data section: the 8-byte header length and the JSON header (the
// entries with their offsets, `__metadata__` when non-empty), padded with spaces so the data
// section starts 8-byte aligned. A writer streaming tensors writes this, then their bytes.
std::string safetensors_header(const std::vector<TensorEntry>& entries,
                               const std::map<std::string, std::string>& metadata);

// Converts n floats or doubles to `dtype` (F64, F32 or BF16) into dst (n * dtype_size bytes);
// `name` names the tensor in the error for another dtype.
void encode_floats(DType dtype, const float* src, size_t n, uint8_t* dst, const std::string& name);
void encode_floats(DType dtype, const double* src, size_t n, uint8_t* dst, const std::string& name);

// Parses JSON text, failing with one line that starts with `where` on invalid JSON or on a key
// that appears twice in one object (nlohmann keeps the last one silently). `top` names the
// keys of the outermost object in that message ("tensor", "key", ...).
nlohmann::json parse_json_unique_keys(std::string_view text, const std::string& where, const char* top = "key");

// A name for an error message: in single quotes, control characters as \xNN (one line).
std::string quote_name(std::string_view name);

}  // namespace zaya
