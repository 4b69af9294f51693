#include "ckpt/hf_convert.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/tokenizer_files.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/log.h"
#include "model/params.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

size_t numel_of(const std::vector<int64_t>& s) {
  size_t n = 1;
  for (int64_t d : s) n *= size_t(d);
  return n;
}

void fsync_path(const std::string& path, bool dir) {
  int fd = ::open(path.c_str(), dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) fail(path, ": cannot open to fsync (", std::strerror(errno), ")");
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(path, ": fsync failed (", std::strerror(errno), ")");
}

// A destination directory built under a temporary name next to it and renamed into place
// by commit(); destroyed uncommitted, it removes the temporary and leaves `out` untouched.
class StagedDir {
 public:
  StagedDir(const std::string& out, bool force) : out_(fs::path(out).lexically_normal()) {
    if (out_.filename().empty()) out_ = out_.parent_path();  // "dir/" -> "dir"
    std::error_code ec;
    if (fs::exists(out_, ec)) {
      if (!fs::is_directory(out_)) fail(out_.string(), ": exists and is not a directory");
      if (!fs::is_empty(out_) && !force) fail(out_.string(), ": not empty (give --force to replace it)");
    }
    fs::path parent = out_.has_parent_path() ? out_.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) fail(parent.string(), ": cannot create directory (", ec.message(), ")");
    tmp_ = parent / (".tmp-" + out_.filename().string() + "-" + std::to_string(::getpid()));
    fs::remove_all(tmp_, ec);
  }
  ~StagedDir() {
    std::error_code ec;
    if (!committed_) fs::remove_all(tmp_, ec);
  }
  const fs::path& tmp() const { return tmp_; }
  const fs::path& out() const { return out_; }
  void create() {
    std::error_code ec;
    fs::create_directories(tmp_, ec);
    if (ec) fail(tmp_.string(), ": cannot create directory (", ec.message(), ")");
  }
  // `src` (tmp() or a directory inside it) becomes out().
  void commit(const fs::path& src) {
    fsync_path(src.string(), true);
    std::error_code ec;
    fs::path trash;
    if (fs::exists(out_)) {
      trash = out_.parent_path() / (".trash-" + out_.filename().string() + "-" + std::to_string(::getpid()));
      fs::remove_all(trash, ec);
      fs::rename(out_, trash, ec);
      if (ec) fail(out_.string(), ": cannot move the old directory aside (", ec.message(), ")");
    }
    fs::rename(src, out_, ec);
    if (ec) {
      if (!trash.empty()) fs::rename(trash, out_, ec);
      fail(out_.string(), ": rename from ", src.string(), " failed (", ec.message(), ")");
    }
    fsync_path(out_.has_parent_path() ? out_.parent_path().string() : ".", true);
    committed_ = true;
    fs::remove_all(tmp_, ec);
    if (!trash.empty()) fs::remove_all(trash, ec);
  }

 private:
  fs::path out_, tmp_;
  bool committed_ = false;
};

// One safetensors file written tensor by tensor: the header first (shapes are known), then
// each tensor's bytes as `fill` produces them, so only one tensor is in memory at a time.
struct StreamItem {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
void write_safetensors_streamed(const std::string& path, const std::vector<StreamItem>& items,
                                const std::function<void(size_t i, uint8_t* dst)>& fill) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  std::vector<uint64_t> bytes;
  for (const StreamItem& it : items) {
    bytes.push_back(numel_of(it.shape) * dtype_size(it.dtype));
    h[it.name] = {{"dtype", dtype_name(it.dtype)}, {"shape", it.shape}, {"data_offsets", {off, off + bytes.back()}}};
    off += bytes.back();
  }
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8) hs.push_back(' ');  // data section 8-byte aligned, as SafetensorsWriter
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail(path, ": cannot create (", std::strerror(errno), ")");
  auto put = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
      ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int err = errno;
        ::close(fd);
        fail(path, ": write failed (", std::strerror(err), ")");
      }
      c += w, n -= size_t(w);
    }
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(hs.size()) >> (8 * i));
  put(len, 8);
  put(hs.data(), hs.size());
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < items.size(); ++i) {
    buf.resize(bytes[i]);
    fill(i, buf.data());
    put(buf.data(), buf.size());
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, ": fsync failed (", std::strerror(err), ")");
  }
  ::close(fd);
}

void write_text(const fs::path& p, const std::string& s) { write_file_atomic(p.string(), s.data(), s.size()); }

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// HF directories

HfDir::HfDir(const std::string& dir) : dir_(dir) {
  auto& pos = index_;
  auto add = [&](const SafetensorsFile* f, const TensorEntry* e) {
    if (pos.count(e->name)) fail(f->path(), ": tensor '", e->name, "' is also in ", entries_[pos[e->name]].file->path());
    pos[e->name] = names_.size();
    names_.push_back(e->name);
    entries_.push_back({f, e});
  };
  HfShards shards = open_hf_shards(dir);
  for (const HfShards::Tensor& t : shards.tensors) add(t.file, t.entry);
  files_ = std::move(shards.files);
}

HfDir::~HfDir() = default;

const HfDir::Entry* HfDir::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

bool is_hf_dir(const std::string& path) { return fs::exists(fs::path(path) / "config.json"); }

void check_hf_compatible(const ModelConfig& c) {
  // The same conditions as save_hf_dir's (ckpt/hf.cpp).
  if (c.num_q_heads * 2 != c.num_attention_heads)
    fail("config: cca_num_q_heads (", c.num_q_heads, ") must be num_attention_heads / 2 (", c.num_attention_heads,
         ") for the released HF ZAYA code, which sizes o_proj from the nominal heads");
  if (c.topk != 1) fail("config: moe_router_topk (", c.topk, ") must be 1 for the released HF ZAYA code");
}

uint64_t parse_shard_size(const std::string& s) {
  if (s == "none") return 0;
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  double v = 0;
  try {
    v = i ? std::stod(s.substr(0, i)) : -1;
  } catch (const std::exception&) {
    v = -1;
  }
  static const std::map<std::string, double> mul = {{"", 1},     {"B", 1},      {"KB", 1e3},    {"MB", 1e6},
                                                    {"GB", 1e9}, {"TB", 1e12},  {"KiB", 1024.}, {"MiB", 1048576.},
                                                    {"GiB", 1073741824.}};
  auto it = mul.find(s.substr(i));
  ZAYA_CHECK(v >= 0 && it != mul.end(), "--max-shard-size: '", s, "' is not a size (e.g. 5GB, 500MB, 2GiB, none)");
  return uint64_t(v * it->second);
}

// ---------------------------------------------------------------------------------------
// Export

ConvertSummary export_hf(const std::string& ckpt_path, const std::string& out, const ExportHfOptions& o) {
  ZAYA_CHECK(o.dtype == DType::F32 || o.dtype == DType::BF16, "export dtype must be F32 or BF16");
  Checkpoint ck(ckpt_path);
  const ModelConfig cfg = checkpoint_model_config(ck);
  cfg.validate();
  if (o.check_hf_compat) check_hf_compatible(cfg);
  const ModelLayout L = build_layout(cfg);
  // Every tensor the model has must be in the checkpoint with its shape, and nothing more.
  struct Item {
    const ParamInfo* p;
    std::string ck_name;  // "" -> initial values (a balancing-bias buffer the checkpoint lacks)
    DType dtype;
  };
  std::vector<Item> items;
  for (const ParamInfo& p : L.params.params) {
    const std::string n = "param/" + p.name;
    ZAYA_CHECK(ck.has(n), "checkpoint ", ck.dir(), ": no tensor ", n, " (the model config has it)");
    ZAYA_CHECK(ck.tensor(n).shape == p.shape, "checkpoint ", ck.dir(), ": tensor ", n, " has shape ",
               shape_str(ck.tensor(n).shape), ", the model config needs ", shape_str(p.shape));
    items.push_back({&p, n, o.dtype});
  }
  for (const ParamInfo& p : L.buffers.params) {
    const std::string n = "buffer/" + p.name;
    const bool have = ck.has(n);
    if (have)
      ZAYA_CHECK(ck.tensor(n).shape == p.shape, "checkpoint ", ck.dir(), ": tensor ", n, " has shape ",
                 shape_str(ck.tensor(n).shape), ", the model config needs ", shape_str(p.shape));
    else
      log_warn("checkpoint ", ck.dir(), ": no ", n, "; exporting the initial balancing biases");
    items.push_back({&p, have ? n : "", DType::F32});  // biases stay F32: they steer discrete choices
  }
  for (const auto& t : ck.tensors())
    if ((t.name.rfind("param/", 0) == 0 && !L.params.find(t.name.substr(6))) ||
        (t.name.rfind("buffer/", 0) == 0 && !L.buffers.find(t.name.substr(7))))
      fail("checkpoint ", ck.dir(), ": tensor ", t.name, " is not in the model its model_config describes");
  std::vector<float> init_bufs(L.buffers.total);
  init_buffers(L, init_bufs.data());

  // Shard plan: tensors in table order, a new shard when the next would overflow.
  std::vector<std::vector<size_t>> shards(1);
  uint64_t cur = 0, total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t b = items[i].p->numel * dtype_size(items[i].dtype);
    if (o.max_shard_bytes && cur + b > o.max_shard_bytes && !shards.back().empty()) shards.emplace_back(), cur = 0;
    shards.back().push_back(i);
    cur += b, total += b;
  }

  StagedDir stage(out, o.force);
  stage.create();
  ConvertSummary sum;
  json weight_map = json::object();
  std::vector<float> f32;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string fn = shards.size() == 1 ? "model.safetensors" : shard_name(s, shards.size());
    std::vector<StreamItem> st;
    for (size_t i : shards[s]) {
      st.push_back({items[i].p->name, items[i].dtype, items[i].p->shape});
      weight_map[items[i].p->name] = fn;
    }
    write_safetensors_streamed((stage.tmp() / fn).string(), st, [&](size_t k, uint8_t* dst) {
      const Item& it = items[shards[s][k]];
      const size_t n = it.p->numel;
      float* src = it.dtype == DType::F32 ? reinterpret_cast<float*>(dst) : (f32.resize(n), f32.data());
      if (it.ck_name.empty())
        std::memcpy(src, init_bufs.data() + it.p->offset, n * 4);
      else
        ck.read(it.ck_name, src, 0, n, it.p->shape);
      if (it.dtype == DType::BF16)
        for (size_t e = 0; e < n; ++e) {
          const uint16_t b = to_bf16(src[e]).bits;
          std::memcpy(dst + 2 * e, &b, 2);
        }
    });
    sum.bytes += fs::file_size(stage.tmp() / fn);
    ++sum.files;
  }
  if (shards.size() > 1)
    write_text(stage.tmp() / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
  json hf = cfg.to_hf_json();
  hf["torch_dtype"] = o.dtype == DType::BF16 ? "bfloat16" : "float32";
  write_text(stage.tmp() / "config.json", hf.dump(2) + "\n");
  write_text(stage.tmp() / "generation_config.json",
             json{{"bos_token_id", cfg.bos_token_id}, {"eos_token_id", cfg.eos_token_id},
                  {"pad_token_id", cfg.pad_token_id}}
                     .dump(2) + "\n");
  const std::string tok = checkpoint_tokenizer(ck);
  if (!tok.empty()) {
    for (const auto& [src, name] : tokenizer_files(tok)) {
      std::ifstream in(src, std::ios::binary);
      std::ostringstream os;
      os << in.rdbuf();
      ZAYA_CHECK(in, src, ": cannot read the tokenizer");
      write_text(stage.tmp() / name, os.str());
    }
    sum.tokenizer = true;
  }
  stage.commit(stage.tmp());
  sum.out = stage.out().string();
  sum.tensors = items.size();
  sum.step = ck.step();
  return sum;
}

// ---------------------------------------------------------------------------------------
// Import

namespace {

// Every tensor config.json implies is there with its shape and a float dtype; returns the layout.
ModelLayout check_hf_tensors(const std::string& hfdir, const HfDir& hf) {
  ZAYA_CHECK(is_hf_dir(hfdir), hfdir, ": no config.json (not an HF directory)");
  const ModelConfig cfg = load_model_config_hf((fs::path(hfdir) / "config.json").string());
  cfg.validate();
  ModelLayout L = build_layout(cfg);
  auto check = [&](const ParamInfo& p, const HfDir::Entry* e) {
    ZAYA_CHECK(e->e->shape == p.shape, e->file->path(), ": tensor '", p.name, "' has shape ", shape_str(e->e->shape),
               ", config.json needs ", shape_str(p.shape));
    const DType d = e->e->dtype;
    ZAYA_CHECK(d == DType::F32 || d == DType::BF16 || d == DType::F16 || d == DType::F64, e->file->path(),
               ": tensor '", p.name, "' is ", dtype_name(d), ", expected a floating-point dtype");
  };
  for (const ParamInfo& p : L.params.params) {
    const HfDir::Entry* e = hf.find(p.name);
    if (!e) fail(hfdir, ": missing tensor '", p.name, "'");
    check(p, e);
  }
  for (const ParamInfo& p : L.buffers.params)
    if (const HfDir::Entry* e = hf.find(p.name)) check(p, e);
  if (const HfDir::Entry* e = hf.find("lm_head.weight"))
    ZAYA_CHECK(e->e->shape == L.params.find("model.embed_tokens.weight")->shape,
               e->file->path(), ": tensor 'lm_head.weight' has shape ", shape_str(e->e->shape),
               ", the tied embedding is ", shape_str(L.params.find("model.embed_tokens.weight")->shape));
  for (const std::string& n : hf.names())
    if (!L.params.find(n) && !L.buffers.find(n) && n != "lm_head.weight")
      log_warn(hf.find(n)->file->path(), ": ignoring unknown tensor '", n, "'");
  return L;
}

}  // namespace

size_t verify_hf_dir(const std::string& hfdir) {
  ZAYA_CHECK(is_hf_dir(hfdir), hfdir, ": no config.json (not an HF directory)");
  HfDir hf(hfdir);
  check_hf_tensors(hfdir, hf);
  return hf.names().size();
}

ConvertSummary import_hf(const std::string& hfdir, const std::string& out, bool force) {
  ZAYA_CHECK(is_hf_dir(hfdir), hfdir, ": no config.json (not an HF directory)");
  HfDir hf(hfdir);
  const ModelLayout L = check_hf_tensors(hfdir, hf);
  const ModelConfig& cfg = L.cfg;

  // Zero-copy where the stored dtype is one a checkpoint holds (F32, BF16): the writer reads
  // straight from the memory-mapped HF files. F16/F64 are converted to F32.
  StagedDir stage(out, force);
  std::vector<std::vector<float>> owned;
  std::vector<float> init_bufs(L.buffers.total);
  init_buffers(L, init_bufs.data());
  {
    CheckpointWriter w(stage.tmp().string(), 0);
    auto add = [&](const std::string& file, const std::string& group, const ParamInfo& p, const HfDir::Entry* e) {
      if (!e) {
        log_warn(hfdir, ": no '", p.name, "'; using the initial balancing biases");
        w.add_f32(file, group + p.name, p.shape, 0, p.numel, init_bufs.data() + p.offset);
      } else if (e->e->dtype == DType::F32 || e->e->dtype == DType::BF16) {
        w.add(file, group + p.name, e->e->dtype, p.shape, 0, p.numel, e->file->data(*e->e));
      } else {
        owned.emplace_back(p.numel);
        e->file->read(p.name, owned.back().data(), p.shape);
        w.add_f32(file, group + p.name, p.shape, 0, p.numel, owned.back().data());
      }
    };
    for (const ParamInfo& p : L.params.params) add("params-r00000.safetensors", "param/", p, hf.find(p.name));
    for (const ParamInfo& p : L.buffers.params) add("buffers.safetensors", "buffer/", p, hf.find(p.name));
    const std::string tok = find_model_tokenizer(hfdir);  // tokenizer.json, else tokenizer.model
    std::string tok_name;                                  // its name in the checkpoint
    if (!tok.empty())
      for (const auto& [src, name] : tokenizer_files(tok)) {
        w.copy_file(src, name);
        if (tok_name.empty()) tok_name = name;
      }
    json header = {
        {"tokens", 0},
        {"time", long(std::time(nullptr))},
        {"layout", {{"world", 1}, {"dp", 1}, {"ep", 1}, {"cp", 1}, {"zero1", false}}},
        {"model_config", {{"toml", cfg.to_toml()}, {"hf", cfg.to_hf_json()}}},
        {"tokenizer", tok_name},
        // Weights only: no optimizer, balancer or loader state, so `zaya train --resume`
        // refuses it and `--init-from` starts those fresh.
        {"state", {{"imported_from", {{"hf_dir", fs::absolute(hfdir).lexically_normal().string()}}}}}};
    const std::string dir = w.commit(header, {w.write_files()});
    stage.commit(dir);
  }
  Checkpoint ck(stage.out().string());
  ConvertSummary sum;
  sum.out = ck.dir();
  sum.tensors = ck.tensors().size();
  for (auto& [name, bytes] : ck.manifest()["files"].items()) sum.bytes += bytes.get<uint64_t>(), ++sum.files;
  sum.tokenizer = !checkpoint_tokenizer(ck).empty();
  return sum;
}

// ---------------------------------------------------------------------------------------
// Diff

namespace {

// A weight set by HF name: a checkpoint (param/ and buffer/ prefixes dropped; other tensors
// keep their names) or an HF directory.
struct WeightSet {
  std::unique_ptr<Checkpoint> ck;
  std::unique_ptr<HfDir> hf;
  std::vector<std::string> names;            // HF-style names, in stored order
  std::map<std::string, std::string> stored;  // HF-style name -> stored name
  explicit WeightSet(const std::string& path) {
    if (is_hf_dir(path)) {
      hf = std::make_unique<HfDir>(path);
      for (const std::string& n : hf->names()) names.push_back(n), stored[n] = n;
    } else {
      ck = std::make_unique<Checkpoint>(path);
      for (const auto& t : ck->tensors()) {
        std::string n = t.name;
        for (const char* pre : {"param/", "buffer/"})
          if (n.rfind(pre, 0) == 0) n = n.substr(std::strlen(pre));
        names.push_back(n), stored[n] = t.name;
      }
    }
  }
  bool is_weight(const std::string& n) const { return hf || stored.at(n) != n; }
  std::vector<int64_t> shape(const std::string& n) const {
    return hf ? hf->find(n)->e->shape : ck->tensor(stored.at(n)).shape;
  }
  std::string dtype(const std::string& n) const {
    return dtype_name(hf ? hf->find(n)->e->dtype : ck->tensor(stored.at(n)).dtype);
  }
  void read(const std::string& n, float* dst) const {
    if (hf)
      hf->find(n)->file->read(n, dst);
    else
      ck->read(stored.at(n), dst);
  }
};

}  // namespace

DiffResult diff_weights(const std::string& a_path, const std::string& b_path) {
  const WeightSet a(a_path), b(b_path);
  const bool both_ck = a.ck && b.ck;
  DiffResult r;
  std::vector<float> va, vb;
  for (const std::string& n : a.names) {
    if (!a.is_weight(n) && !(both_ck && b.stored.count(n))) {
      ++r.skipped_a;
      continue;
    }
    TensorDiff d;
    d.name = n;
    d.shape_a = a.shape(n);
    d.dtype_a = a.dtype(n);
    if (!b.stored.count(n)) {
      d.status = "only in A";
      r.tensors.push_back(d);
      continue;
    }
    d.shape_b = b.shape(n);
    d.dtype_b = b.dtype(n);
    if (d.shape_a != d.shape_b) {
      d.status = "shape differs";
      r.tensors.push_back(d);
      continue;
    }
    const size_t cnt = numel_of(d.shape_a);
    va.resize(cnt), vb.resize(cnt);
    a.read(n, va.data());
    b.read(n, vb.data());
    for (size_t i = 0; i < cnt; ++i) {
      const double x = va[i], y = vb[i], ad = std::fabs(x - y);
      if (std::isnan(ad)) {
        if (std::isnan(x) != std::isnan(y)) d.max_abs = d.max_rel = INFINITY;
        continue;
      }
      d.max_abs = std::max(d.max_abs, ad);
      const double m = std::max(std::fabs(x), std::fabs(y));
      if (ad > 0) d.max_rel = std::max(d.max_rel, ad / m);
    }
    r.tensors.push_back(d);
  }
  for (const std::string& n : b.names) {
    if (a.stored.count(n)) continue;
    if (!b.is_weight(n)) {
      ++r.skipped_b;
      continue;
    }
    TensorDiff d;
    d.name = n;
    d.status = "only in B";
    d.shape_b = b.shape(n);
    d.dtype_b = b.dtype(n);
    r.tensors.push_back(d);
  }
  return r;
}

}  // namespace zaya
