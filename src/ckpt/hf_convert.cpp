#include "ckpt/hf_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_writer.h"
#include "ckpt/tokenizer_files.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/io.h"
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

// `out` normalized ("dir/" -> "dir"), once it may be written: absent, an empty directory, or
// any directory when `force`.
std::string checked_destination(const std::string& out, bool force) {
  fs::path o = fs::path(out).lexically_normal();
  if (o.filename().empty()) o = o.parent_path();
  std::error_code ec;
  if (fs::exists(o, ec)) {
    if (!fs::is_directory(o)) fail(o.string(), ": exists and is not a directory");
    if (!fs::is_empty(o) && !force) fail(o.string(), ": not empty (give --force to replace it)");
  }
  return o.string();
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
  Checkpoint ck(ckpt_path);
  const ModelConfig cfg = checkpoint_model_config(ck);
  cfg.validate();
  HfWriteOptions wo;
  wo.dtype = o.dtype;
  wo.max_shard_bytes = o.max_shard_bytes;
  wo.check_hf_compat = o.check_hf_compat;
  wo.final_newline = true;
  HfWriter writer(cfg, wo);
  const ModelLayout L = build_layout(cfg);
  // Every tensor the model has must be in the checkpoint with its shape, and nothing more.
  // A buffer the checkpoint lacks (a balancing bias) is exported with its initial values.
  std::vector<float> init_bufs(L.buffers.total);
  init_buffers(L, init_bufs.data());
  std::vector<float> f32;
  auto add = [&](const ParamInfo& p, const std::string& ck_name, DType dtype) {
    writer.add({p.name, dtype, p.shape, [&, pp = &p, ck_name, dtype](uint8_t* dst) {
                  const ParamInfo& p = *pp;
                  const size_t n = p.numel;
                  float* src = dtype == DType::F32 ? reinterpret_cast<float*>(dst) : (f32.resize(n), f32.data());
                  if (ck_name.empty())
                    std::memcpy(src, init_bufs.data() + p.offset, n * 4);
                  else
                    ck.read(ck_name, src, 0, n, p.shape);
                  if (dtype == DType::BF16)
                    for (size_t e = 0; e < n; ++e) {
                      const uint16_t b = to_bf16(src[e]).bits;
                      std::memcpy(dst + 2 * e, &b, 2);
                    }
                }});
  };
  size_t tensors = 0;
  for (const ParamInfo& p : L.params.params) {
    const std::string n = "param/" + p.name;
    ZAYA_CHECK(ck.has(n), "checkpoint ", ck.dir(), ": no tensor ", n, " (the model config has it)");
    ZAYA_CHECK(ck.tensor(n).shape == p.shape, "checkpoint ", ck.dir(), ": tensor ", n, " has shape ",
               shape_str(ck.tensor(n).shape), ", the model config needs ", shape_str(p.shape));
    add(p, n, o.dtype);
    ++tensors;
  }
  for (const ParamInfo& p : L.buffers.params) {
    const std::string n = "buffer/" + p.name;
    const bool have = ck.has(n);
    if (have)
      ZAYA_CHECK(ck.tensor(n).shape == p.shape, "checkpoint ", ck.dir(), ": tensor ", n, " has shape ",
                 shape_str(ck.tensor(n).shape), ", the model config needs ", shape_str(p.shape));
    else
      log_warn("checkpoint ", ck.dir(), ": no ", n, "; exporting the initial balancing biases");
    add(p, have ? n : "", DType::F32);  // biases stay F32: they steer discrete choices
    ++tensors;
  }
  for (const auto& t : ck.tensors())
    if ((t.name.rfind("param/", 0) == 0 && !L.params.find(t.name.substr(6))) ||
        (t.name.rfind("buffer/", 0) == 0 && !L.buffers.find(t.name.substr(7))))
      fail("checkpoint ", ck.dir(), ": tensor ", t.name, " is not in the model its model_config describes");

  StagedDir stage(checked_destination(out, o.force));
  stage.create();
  const HfWriteSummary written = writer.write(stage.tmp());
  ConvertSummary sum;
  sum.files = written.files;
  sum.bytes = written.file_bytes;
  const std::string tok = checkpoint_tokenizer(ck);
  if (!tok.empty()) {
    for (const auto& [src, name] : tokenizer_files(tok)) {
      std::ifstream in(src, std::ios::binary);
      std::ostringstream os;
      os << in.rdbuf();
      ZAYA_CHECK(in, src, ": cannot read the tokenizer");
      write_file_atomic((fs::path(stage.tmp()) / name).string(), os.str());
    }
    sum.tokenizer = true;
  }
  stage.commit();
  sum.out = stage.out();
  sum.tensors = tensors;
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
  StagedDir stage(checked_destination(out, force));
  std::vector<std::vector<float>> owned;
  std::vector<float> init_bufs(L.buffers.total);
  init_buffers(L, init_bufs.data());
  {
    CheckpointWriter w(stage.tmp(), 0);
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
  Checkpoint ck(stage.out());
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

DiffResult diff_weights(const std::string& a_path, const std::string& b_path, bool nan_equal) {
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
      if (!std::isfinite(x) || !std::isfinite(y)) {  // std::max(m, NaN) keeps m: decided here
        d.nonfinite_a += !std::isfinite(x), d.nonfinite_b += !std::isfinite(y);
        const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
        if (!(nan_equal && same)) d.max_abs = d.max_rel = INFINITY;
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
