#include "ckpt/hf.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "ckpt/hf_writer.h"
#include "core/error.h"
#include "core/log.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// name -> open file holding it.
struct HfTensors {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> where;

  explicit HfTensors(const std::string& dir) {
    HfShards shards = open_hf_shards(dir);
    for (const HfShards::Tensor& t : shards.tensors) where[t.entry->name] = t.file;
    files = std::move(shards.files);
  }
};

}  // namespace

HfShards open_hf_shards(const std::string& dir) {
  const HfShardList list = hf_shard_list(dir);
  HfShards out;
  std::map<std::string, const SafetensorsFile*> by_path;
  for (const std::string& path : list.files) {
    out.files.push_back(std::make_unique<SafetensorsFile>(path));
    by_path[path] = out.files.back().get();
  }
  for (const auto& [name, path] : list.weight_map) {
    const SafetensorsFile* f = by_path[path];
    const TensorEntry* e = f->find(name);
    if (!e) fail(f->path(), ": the index says it holds ", quote_name(name), " but it does not");
    out.tensors.push_back({f, e});
  }
  if (list.weight_map.empty())
    for (const TensorEntry& e : out.files.back()->tensors()) out.tensors.push_back({out.files.back().get(), &e});
  return out;
}

HfShardList hf_shard_list(const std::string& dir) {
  HfShardList out;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    const fs::path p = fs::path(dir) / "model.safetensors";
    if (!fs::exists(p)) fail(dir, ": neither model.safetensors nor model.safetensors.index.json found");
    out.files.push_back(p.string());
    return out;
  }
  std::string text;
  {
    std::ifstream in(index, std::ios::binary);
    if (!in) fail(index.string(), ": cannot read");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // A name twice in weight_map would silently keep the last file: an error, as in a header.
  const json j = parse_json_unique_keys(text, index.string());
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index.string(), ": missing object 'weight_map'");
  if (j["weight_map"].empty()) fail(index.string(), ": weight_map names no tensor");
  for (auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail(index.string(), ": weight_map entry ", quote_name(name), " is not a file name");
    const std::string fn = file.get<std::string>();
    if (fn.empty() || fn.find('/') != std::string::npos || fn == "." || fn == "..")
      fail(index.string(), ": weight_map entry ", quote_name(name), ": shard ", quote_name(fn),
           " is not a file in the directory");
    const std::string path = (fs::path(dir) / fn).string();
    if (std::find(out.files.begin(), out.files.end(), path) == out.files.end()) {
      if (!fs::is_regular_file(path))
        fail(index.string(), ": shard ", quote_name(fn), " (holding ", quote_name(name), ") is missing");
      out.files.push_back(path);
    }
    out.weight_map[name] = path;
  }
  return out;
}

template <class T>
void load_hf_weights(const std::string& dir, Model<T>& m) {
  HfTensors ts(dir);
  size_t used = 0;
  for (const ParamInfo& p : m.layout.params.params) {
    auto it = ts.where.find(p.name);
    if (it == ts.where.end()) fail(dir, ": missing tensor '", p.name, "'");
    it->second->read(p.name, m.params.data() + p.offset, p.shape);
    ++used;
  }
  for (const ParamInfo& p : m.layout.buffers.params) {
    auto it = ts.where.find(p.name);
    if (it == ts.where.end()) {
      log_warn(dir, ": no '", p.name, "'; using the initial balancing biases");
      continue;
    }
    it->second->read(p.name, m.buffers.data() + p.offset, p.shape);
    ++used;
  }
  if (auto it = ts.where.find("lm_head.weight"); it != ts.where.end()) {
    const TensorEntry* e = it->second->find("lm_head.weight");
    const ParamInfo* emb = m.layout.params.find("model.embed_tokens.weight");
    if (e->shape != emb->shape) fail(it->second->path(), ": tensor 'lm_head.weight' has the wrong shape");
    ++used;  // tied: the embedding is the head
  }
  // Expert weights outside this process's expert range are expected to be unused.
  size_t foreign = 0;
  for (auto& [name, f] : ts.where)
    if (!m.layout.params.find(name) && !m.layout.buffers.find(name) && name != "lm_head.weight") {
      if (name.find(".local_experts.") == std::string::npos) log_warn(f->path(), ": ignoring unknown tensor '", name, "'");
      ++foreign;
    }
  (void)foreign;
}

template <class T>
void save_hf_dir(const std::string& dir, const Model<T>& m, DType dtype, size_t max_shard_bytes,
                 bool check_hf_compat) {
  const ModelConfig& c = m.cfg();
  HfWriteOptions o;
  o.dtype = dtype;
  o.max_shard_bytes = max_shard_bytes;
  o.check_hf_compat = check_hf_compat;
  HfWriter w(c, o);
  ZAYA_CHECK(m.layout.experts.count() == c.num_experts, "export needs all experts in one process");
  auto add = [&](const ParamInfo& p, const T* data) {
    // Balancing biases stay fp32: they steer discrete choices and are tiny.
    const DType dt = p.name.find("balancing_biases") != std::string::npos ? DType::F32 : dtype;
    w.add({p.name, dt, p.shape, [pp = &p, data, dt](uint8_t* dst) { encode_floats(dt, data, pp->numel, dst, pp->name); }});
  };
  for (const ParamInfo& p : m.layout.params.params) add(p, m.params.data() + p.offset);
  for (const ParamInfo& p : m.layout.buffers.params) add(p, m.buffers.data() + p.offset);
  w.write(dir);
}

template void load_hf_weights<float>(const std::string&, Model<float>&);
template void load_hf_weights<double>(const std::string&, Model<double>&);
template void save_hf_dir<float>(const std::string&, const Model<float>&, DType, size_t, bool);
template void save_hf_dir<double>(const std::string&, const Model<double>&, DType, size_t, bool);

}  // namespace zaya
