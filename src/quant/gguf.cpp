#include "quant/gguf.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace zaya::quant {

namespace {

template <class T>
void put(std::vector<uint8_t>& b, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

const std::pair<const char*, const char*> kNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.final_norm.weight", "output_norm.weight"},
    {"model.layers.", "blk."},
    {".zaya_block.experts.local_experts.", ".ffn_exp."},
    {".zaya_block.router.", ".router."},
    {".self_attn.qkv.", ".attn_qkv."},
    {".self_attn.o_proj.", ".attn_output."},
};

std::string replace_first(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

std::string gguf_name_from_hf(const std::string& hf) {
  std::string s = hf;
  for (auto& [h, g] : kNames) s = replace_first(s, h, g);
  return s;
}

std::string hf_name_from_gguf(const std::string& gguf) {
  std::string s = gguf;
  for (auto& [h, g] : kNames) s = replace_first(s, g, h);
  return s;
}

// ---------------------------------------------------------------- writer

void GgufWriter::key(const std::string& k, GgufType t) {
  put_str(kv_, k);
  put<uint32_t>(kv_, uint32_t(t));
  ++n_kv_;
}
void GgufWriter::kv_string(const std::string& k, const std::string& v) { key(k, GgufType::STRING), put_str(kv_, v); }
void GgufWriter::kv_u32(const std::string& k, uint32_t v) { key(k, GgufType::U32), put(kv_, v); }
void GgufWriter::kv_i32(const std::string& k, int32_t v) { key(k, GgufType::I32), put(kv_, v); }
void GgufWriter::kv_u64(const std::string& k, uint64_t v) { key(k, GgufType::U64), put(kv_, v); }
void GgufWriter::kv_f32(const std::string& k, float v) { key(k, GgufType::F32), put(kv_, v); }
void GgufWriter::kv_bool(const std::string& k, bool v) { key(k, GgufType::BOOL), put<uint8_t>(kv_, v ? 1 : 0); }
void GgufWriter::kv_strings(const std::string& k, const std::vector<std::string>& v) {
  key(k, GgufType::ARRAY);
  put<uint32_t>(kv_, uint32_t(GgufType::STRING));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_str(kv_, s);
}
void GgufWriter::kv_f32s(const std::string& k, const std::vector<float>& v) {
  key(k, GgufType::ARRAY);
  put<uint32_t>(kv_, uint32_t(GgufType::F32));
  put<uint64_t>(kv_, v.size());
  for (float x : v) put(kv_, x);
}
void GgufWriter::kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
  key(k, GgufType::ARRAY);
  put<uint32_t>(kv_, uint32_t(GgufType::I32));
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

size_t GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& ne, QType t) {
  ZAYA_CHECK(!f_, "GGUF writer: tensor ", name, " added after begin()");
  ZAYA_CHECK(name.size() < 64, "GGUF tensor name '", name, "' is longer than 63 bytes");
  ZAYA_CHECK(!ne.empty() && ne.size() <= 4, "GGUF tensor ", name, ": ", ne.size(), " dims (1 to 4)");
  ZAYA_CHECK(ne[0] % qtype_block(t) == 0, "GGUF tensor ", name, ": row of ", ne[0], " is not a multiple of the ",
             qtype_name(uint32_t(t)), " block (", qtype_block(t), ")");
  GgufTensor g;
  g.name = name;
  g.ne = ne;
  g.type = t;
  size_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= size_t(ne[i]);
  g.bytes = rows * qtype_row_bytes(t, ne[0]);
  g.offset = align_up(data_size_, kGgufAlignment);
  data_size_ = g.offset + g.bytes;
  tensors_.push_back(std::move(g));
  return tensors_.back().bytes;
}

void GgufWriter::begin(const std::string& path) {
  std::vector<uint8_t> h;
  put<uint32_t>(h, kGgufMagic);
  put<uint32_t>(h, kGgufVersion);
  put<uint64_t>(h, tensors_.size());
  put<uint64_t>(h, n_kv_);
  h.insert(h.end(), kv_.begin(), kv_.end());
  for (const GgufTensor& t : tensors_) {
    put_str(h, t.name);
    put<uint32_t>(h, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(h, uint64_t(d));
    put<uint32_t>(h, uint32_t(t.type));
    put<uint64_t>(h, t.offset);
  }
  h.resize(align_up(h.size(), kGgufAlignment), 0);
  f_ = std::make_unique<AtomicFile>(path);
  f_->write(h.data(), h.size());
}

void GgufWriter::write(const void* data, size_t bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    ZAYA_CHECK(f_ && next_ < tensors_.size(), "GGUF writer: more bytes written than the tensors added hold");
    const GgufTensor& t = tensors_[next_];
    static const uint8_t zeros[kGgufAlignment] = {};
    if (in_tensor_ == 0 && t.offset > written_) {
      f_->write(zeros, t.offset - written_);
      written_ = t.offset;
    }
    const size_t n = size_t(std::min<uint64_t>(bytes, t.bytes - in_tensor_));
    f_->write(p, n);
    p += n, bytes -= n, in_tensor_ += n, written_ += n;
    if (in_tensor_ == t.bytes) ++next_, in_tensor_ = 0;
  }
}

void GgufWriter::finish() {
  ZAYA_CHECK(f_ && next_ == tensors_.size(), "GGUF writer: ", next_, " of ", tensors_.size(), " tensors written");
  // Tensors of 0 bytes cannot exist (dims >= 1), so the last write ended the data section.
  f_->commit();
  f_.reset();
}

// ---------------------------------------------------------------- reader

namespace {

// Bounds-checked cursor over the mapped header.
struct Cursor {
  const uint8_t* p;
  size_t size, at = 0;
  const std::string& path;
  template <class T>
  T get(const char* what) {
    if (size - at < sizeof(T)) fail(path, ": truncated in ", what, " at byte ", at, " (file is ", size, " bytes)");
    T v;
    std::memcpy(&v, p + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    if (n > size - at) fail(path, ": ", what, " string of ", n, " bytes at byte ", at, " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(p + at), size_t(n));
    at += size_t(n);
    return s;
  }
};

bool scalar_type(uint32_t t) { return t <= uint32_t(GgufType::F64) && t != uint32_t(GgufType::ARRAY); }

// Reads a scalar of type t into v (numbers also into v.nums when `into_array`).
void read_scalar(Cursor& c, GgufType t, GgufValue& v, const std::string& key) {
  const std::string what = "metadata '" + key + "'";
  switch (t) {
    case GgufType::U8: v.u = c.get<uint8_t>(what.c_str()), v.i = int64_t(v.u), v.f = double(v.u); break;
    case GgufType::I8: v.i = c.get<int8_t>(what.c_str()), v.f = double(v.i); break;
    case GgufType::U16: v.u = c.get<uint16_t>(what.c_str()), v.i = int64_t(v.u), v.f = double(v.u); break;
    case GgufType::I16: v.i = c.get<int16_t>(what.c_str()), v.f = double(v.i); break;
    case GgufType::U32: v.u = c.get<uint32_t>(what.c_str()), v.i = int64_t(v.u), v.f = double(v.u); break;
    case GgufType::I32: v.i = c.get<int32_t>(what.c_str()), v.f = double(v.i); break;
    case GgufType::F32: v.f = c.get<float>(what.c_str()); break;
    case GgufType::BOOL: {
      const uint8_t b = c.get<uint8_t>(what.c_str());
      if (b > 1) fail(c.path, ": metadata '", key, "': bool value ", int(b), " (0 or 1)");
      v.u = b, v.i = b, v.f = b;
      break;
    }
    case GgufType::STRING: v.s = c.str(what.c_str()); break;
    case GgufType::U64: v.u = c.get<uint64_t>(what.c_str()), v.i = int64_t(v.u), v.f = double(v.u); break;
    case GgufType::I64: v.i = c.get<int64_t>(what.c_str()), v.f = double(v.i); break;
    case GgufType::F64: v.f = c.get<double>(what.c_str()); break;
    case GgufType::ARRAY: fail(c.path, ": metadata '", key, "': arrays of arrays are not read");
  }
  if (v.i >= 0 && t != GgufType::U64 && t != GgufType::U32 && t != GgufType::U16 && t != GgufType::U8)
    v.u = uint64_t(v.i);
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path), file_(path) {
  const size_t size = file_.size();
  if (size < 24) fail(path, ": truncated: ", size, " bytes is less than a GGUF header (24)");
  Cursor c{file_.data(), size, 0, path_};
  const uint32_t magic = c.get<uint32_t>("magic");
  if (magic != kGgufMagic) fail(path, ": not a GGUF file (magic 0x", std::hex, magic, ", expected 0x46554747)");
  version_ = c.get<uint32_t>("version");
  if (version_ != 2 && version_ != 3) fail(path, ": GGUF version ", version_, " (2 and 3 are read)");
  const uint64_t n_tensors = c.get<uint64_t>("tensor_count"), n_kv = c.get<uint64_t>("metadata_kv_count");
  // Every tensor info and key takes at least 8 bytes: larger counts cannot fit the file.
  if (n_tensors > size / 8) fail(path, ": tensor_count ", n_tensors, " cannot fit in ", size, " bytes");
  if (n_kv > size / 8) fail(path, ": metadata_kv_count ", n_kv, " cannot fit in ", size, " bytes");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.str("metadata key");
    const uint32_t t = c.get<uint32_t>("metadata value type");
    GgufValue v;
    if (t == uint32_t(GgufType::ARRAY)) {
      v.type = GgufType::ARRAY;
      const uint32_t et = c.get<uint32_t>("array element type");
      if (!scalar_type(et)) fail(path, ": metadata '", key, "': array element type ", et, " is not a GGUF scalar type");
      v.elem = GgufType(et);
      const uint64_t n = c.get<uint64_t>("array length");
      if (n > size - c.at) fail(path, ": metadata '", key, "': array of ", n, " values cannot fit in the file");
      for (uint64_t j = 0; j < n; ++j) {
        GgufValue e;
        read_scalar(c, v.elem, e, key);
        if (v.elem == GgufType::STRING)
          v.strs.push_back(std::move(e.s));
        else
          v.nums.push_back(e.f);
      }
    } else {
      if (!scalar_type(t)) fail(path, ": metadata '", key, "': value type ", t, " is not a GGUF type");
      v.type = GgufType(t);
      read_scalar(c, v.type, v, key);
    }
    if (!kv_.emplace(key, std::move(v)).second) fail(path, ": metadata key '", key, "' appears twice");
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32 || a->u == 0 || (a->u & (a->u - 1)))
      fail(path, ": general.alignment must be a power of two (uint32), got ", a->u);
    alignment_ = uint32_t(a->u);
  }
  for (uint64_t ti = 0; ti < n_tensors; ++ti) {
    GgufTensor t;
    t.name = c.str("tensor name");
    const uint32_t nd = c.get<uint32_t>("tensor n_dims");
    if (nd == 0 || nd > 4) fail(path, ": tensor '", t.name, "' has ", nd, " dims (1 to 4)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t v = c.get<uint64_t>("tensor dims");
      if (v == 0 || v > (uint64_t(1) << 40) || numel > (uint64_t(1) << 40) / v)
        fail(path, ": tensor '", t.name, "' dim ", d, " = ", v, " is out of range");
      numel *= v;
      t.ne.push_back(int64_t(v));
    }
    const uint32_t ty = c.get<uint32_t>("tensor type");
    if (!qtype_known(ty)) fail(path, ": tensor '", t.name, "' has ggml type ", ty, ", which zaya does not read");
    t.type = QType(ty);
    if (t.ne[0] % qtype_block(t.type))
      fail(path, ": tensor '", t.name, "' (", qtype_name(ty), "): row of ", t.ne[0],
           " elements is not a whole number of blocks of ", qtype_block(t.type));
    t.bytes = size_t(numel / uint64_t(t.ne[0])) * qtype_row_bytes(t.type, t.ne[0]);
    t.offset = c.get<uint64_t>("tensor offset");
    if (t.offset % alignment_) fail(path, ": tensor '", t.name, "' offset ", t.offset, " is not a multiple of the alignment ", alignment_);
    tensors_.push_back(std::move(t));
  }
  data_offset_ = align_up(c.at, alignment_);
  const uint64_t data_size = size >= data_offset_ ? size - data_offset_ : 0;
  uint64_t end = 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      fail(path, ": truncated: tensor '", t.name, "' (", qtype_name(uint32_t(t.type)), ", ", t.bytes,
           " bytes at data offset ", t.offset, ") runs past the end of the file (", data_size, " bytes of data)");
    if (t.offset < end) fail(path, ": tensor '", t.name, "' at data offset ", t.offset, " overlaps the tensor before it");
    end = t.offset + t.bytes;
    t.data = file_.data() + data_offset_ + t.offset;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata '", key, "'");
  if (v->type != GgufType::STRING) fail(path_, ": metadata '", key, "' is not a string");
  return v->s;
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, ": missing metadata '", key, "'");
  const bool integral = v->type <= GgufType::I32 || v->type == GgufType::U64 || v->type == GgufType::I64;
  if (!integral || (v->type != GgufType::U64 && v->i < 0)) fail(path_, ": metadata '", key, "' is not an unsigned integer");
  return v->u;
}

void GgufFile::populate() const { file_.populate(); }

void GgufFile::release(const void* p, size_t n) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = a / 4096 * 4096, hi = (a + n) / 4096 * 4096;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace zaya::quant
