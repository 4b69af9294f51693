#include "ckpt/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"

namespace zaya {
using json = nlohmann::json;

static const std::pair<const char*, DType> kDtypes[] = {
    {"F64", DType::F64}, {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I64", DType::I64},
    {"I32", DType::I32}, {"I16", DType::I16}, {"I8", DType::I8},   {"U8", DType::U8},     {"BOOL", DType::BOOL}};

DType parse_dtype(const std::string& s, const std::string& where) {
  for (auto& [n, d] : kDtypes)
    if (s == n) return d;
  fail(where, ": unsupported dtype '", s, "'");
}

size_t TensorEntry::numel() const {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  return n;
}

static constexpr uint64_t kMaxHeader = 100'000'000;  // the reference's MAX_HEADER_SIZE

std::string quote_name(std::string_view name) {
  std::string r = "'";
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(static_cast<unsigned char>(c)));
      r += buf;
    } else {
      r += c;
    }
  }
  return r + "'";
}

json parse_json_unique_keys(std::string_view text, const std::string& where, const char* top) {
  struct Frame {
    std::set<std::string> keys;
    std::string key;  // the key being read in this object
  };
  std::vector<Frame> stack;
  std::string dup;
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      stack.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!stack.empty()) stack.pop_back();
    } else if (ev == json::parse_event_t::key && !stack.empty()) {
      std::string k = parsed.get<std::string>();
      if (dup.empty() && !stack.back().keys.insert(k).second) {
        dup = stack.size() == 1 ? cat(top, " ", quote_name(k), " appears twice")
                                : cat("key ", quote_name(k), " appears twice in ", quote_name(stack[stack.size() - 2].key));
      }
      stack.back().key = std::move(k);
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    fail(where, ": not valid JSON (", e.what(), ")");
  }
  if (!dup.empty()) fail(where, ": ", dup);
  return j;
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// One header entry: types, the shape's element count and byte length without overflow, and
// offsets inside the data section that span exactly that length.
TensorEntry parse_entry(const std::string& name, const json& v, uint64_t data_len, const std::string& where) {
  if (!v.is_object()) fail(where, ": is not an object");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!v.contains(k)) fail(where, ": field ", k, " is missing");
  TensorEntry e;
  e.name = name;
  if (!v["dtype"].is_string()) fail(where, ": field dtype is not a string");
  e.dtype = parse_dtype(v["dtype"].get<std::string>(), where);
  if (!v["shape"].is_array()) fail(where, ": field shape is not a list");
  uint64_t numel = 1;
  for (const json& d : v["shape"]) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      fail(where, ": shape entry ", d.dump(), " is not a non-negative integer");
    const uint64_t u = d.get<uint64_t>();
    if (u > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, u, &numel))
      fail(where, ": shape ", v["shape"].dump(), " has more elements than 64 bits count");
    e.shape.push_back(int64_t(u));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &bytes))
    fail(where, ": shape ", shape_str(e.shape), " of ", dtype_name(e.dtype), " is more than 2^64 bytes");
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(where, ": field data_offsets is not two non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end) fail(where, ": data_offsets begin ", e.begin, " > end ", e.end);
  if (e.end > data_len) fail(where, ": data_offsets end ", e.end, " is past the data section (", data_len, " bytes)");
  if (e.end - e.begin != bytes)
    fail(where, ": data_offsets span ", e.end - e.begin, " bytes but shape ", shape_str(e.shape), " of ",
         dtype_name(e.dtype), " needs ", bytes);
  return e;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(path) {
  if (file_.size() < 8) fail(path, ": truncated: ", file_.size(), " bytes, shorter than the 8-byte header length");
  parse_header(path);
}

void SafetensorsFile::parse_header(const std::string& path) {
  const uint8_t* base = file_.data();
  const size_t size = file_.size();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeader) fail(path, ": header length ", n, " exceeds the 100 MB limit");
  if (n > size - 8) fail(path, ": truncated: header length ", n, " but the file has ", size, " bytes");
  const char* h = reinterpret_cast<const char*>(base + 8);
  if (n == 0 || h[0] != '{') fail(path, ": header does not start with '{'");
  const json j = parse_json_unique_keys(std::string_view(h, n), path + ": header", "tensor");
  if (!j.is_object()) fail(path, ": header is not a JSON object");
  data_ = base + 8 + n;
  const uint64_t data_len = size - 8 - n;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, ": __metadata__ is not an object");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path, ": __metadata__ value of ", quote_name(k), " is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(parse_entry(name, v, data_len, cat(path, ": tensor ", quote_name(name))));
  }
  // Offsets must tile the data section exactly: no gaps, no overlaps, nothing after the end.
  std::vector<const TensorEntry*> order;
  for (auto& e : tensors_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  uint64_t at = 0;
  const TensorEntry* prev = nullptr;
  for (auto* e : order) {
    if (e->begin < at)
      fail(path, ": tensor ", quote_name(e->name), " at bytes [", e->begin, ", ", e->end, ") overlaps tensor ",
           quote_name(prev->name), " (offsets must be contiguous, without gaps or overlaps)");
    if (e->begin > at)
      fail(path, ": tensor ", quote_name(e->name), " starts at byte ", e->begin, ", expected ", at, " (a gap of ",
           e->begin - at, " bytes; offsets must be contiguous, without gaps or overlaps)");
    at = e->end;
    prev = e;
  }
  if (at != data_len)
    fail(path, ": data section has ", data_len, " bytes but its tensors cover ", at, " (", data_len - at,
         " bytes after the last tensor", prev ? cat(" ", quote_name(prev->name)) : std::string(), ")");
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

template <class T>
void SafetensorsFile::read_impl(const std::string& name, T* dst, const std::vector<int64_t>& expect) const {
  const TensorEntry* e = find(name);
  if (!e) fail(path_, ": missing tensor '", name, "'");
  if (!expect.empty() && e->shape != expect)
    fail(path_, ": tensor '", name, "' has shape ", shape_str(e->shape), ", expected ", shape_str(expect));
  const uint8_t* src = data(*e);
  const size_t n = e->numel();
  switch (e->dtype) {
    case DType::F32:
      for (size_t i = 0; i < n; ++i) { float f; std::memcpy(&f, src + 4 * i, 4); dst[i] = T(f); }
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) { double f; std::memcpy(&f, src + 8 * i, 8); dst[i] = T(f); }
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) { bf16 h; std::memcpy(&h.bits, src + 2 * i, 2); dst[i] = T(from_bf16(h)); }
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); dst[i] = T(from_fp16(h)); }
      break;
    default:
      fail(path_, ": tensor '", name, "' has dtype ", dtype_name(e->dtype), ", expected a float type");
  }
}

void SafetensorsFile::read(const std::string& name, float* dst, const std::vector<int64_t>& s) const { read_impl(name, dst, s); }
void SafetensorsFile::read(const std::string& name, double* dst, const std::vector<int64_t>& s) const { read_impl(name, dst, s); }

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            size_t bytes) {
  Item it;
  it.e.name = name;
  it.e.dtype = dtype;
  it.e.shape = std::move(shape);
  ZAYA_CHECK(bytes == it.e.numel() * dtype_size(dtype), "tensor '", name, "': ", bytes, " bytes for ", it.e.numel(),
             " elements of ", dtype_name(dtype));
  for (auto& x : items_) ZAYA_CHECK(x.e.name != name, "tensor '", name, "' added twice");
  it.e.begin = offset_;
  it.e.end = offset_ + bytes;
  offset_ = it.e.end;
  it.ptr = data;
  items_.push_back(std::move(it));
}

namespace {

template <class T>
void encode_impl(DType dtype, const T* data, size_t n, uint8_t* out, const std::string& name) {
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::F32) { float f = float(data[i]); std::memcpy(&out[4 * i], &f, 4); }
    else if (dtype == DType::F64) { double f = double(data[i]); std::memcpy(&out[8 * i], &f, 8); }
    else if (dtype == DType::BF16) { bf16 h = to_bf16(float(data[i])); std::memcpy(&out[2 * i], &h.bits, 2); }
    else fail("tensor '", name, "': cannot encode floats as ", dtype_name(dtype));
  }
}

template <class T>
std::vector<uint8_t> encode(DType dtype, const T* data, size_t n, const std::string& name) {
  std::vector<uint8_t> out(n * dtype_size(dtype));
  encode_impl(dtype, data, n, out.data(), name);
  return out;
}

}  // namespace

void encode_floats(DType dtype, const float* src, size_t n, uint8_t* dst, const std::string& name) {
  encode_impl(dtype, src, n, dst, name);
}
void encode_floats(DType dtype, const double* src, size_t n, uint8_t* dst, const std::string& name) {
  encode_impl(dtype, src, n, dst, name);
}

void SafetensorsWriter::add_float(const std::string& name, DType dtype, std::vector<int64_t> shape, const float* data) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  if (dtype == DType::F32) return add(name, dtype, std::move(shape), data, n * 4);
  auto bytes = encode(dtype, data, n, name);
  add(name, dtype, std::move(shape), nullptr, bytes.size());
  items_.back().owned = std::move(bytes);
  items_.back().ptr = items_.back().owned.data();
}

void SafetensorsWriter::add_double(const std::string& name, DType dtype, std::vector<int64_t> shape, const double* data) {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  auto bytes = encode(dtype, data, n, name);
  add(name, dtype, std::move(shape), nullptr, bytes.size());
  items_.back().owned = std::move(bytes);
  items_.back().ptr = items_.back().owned.data();
}

std::string safetensors_header(const std::vector<TensorEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  for (const TensorEntry& e : entries)
    h[e.name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8) hs.push_back(' ');  // align the data section to 8 bytes
  std::string head(8, '\0');
  const uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) head[size_t(i)] = char(uint8_t(n >> (8 * i)));
  return head + hs;
}

void SafetensorsWriter::write(const std::string& path) const {
  std::vector<TensorEntry> entries;
  for (const Item& it : items_) entries.push_back(it.e);
  const std::string head = safetensors_header(entries, metadata_);
  // Written straight from the tensors' memory: no staging copy of the whole file (which
  // cost more than the disk on checkpoint saves).
  std::vector<std::pair<const void*, size_t>> pieces = {{head.data(), head.size()}};
  for (const Item& it : items_)
    if (it.e.end > it.e.begin) pieces.push_back({it.ptr, it.e.end - it.e.begin});
  write_file_atomic(path, pieces);
}

bool SafetensorsFile::populate(bool always_reread) const { return file_.populate(always_reread); }

}  // namespace zaya
