#include "ckpt/hf.h"

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

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
  if (check_hf_compat) {
    if (c.num_q_heads * 2 != c.num_attention_heads)
      fail("config: cca_num_q_heads (", c.num_q_heads, ") must be num_attention_heads / 2 (",
           c.num_attention_heads, ") for the released HF ZAYA code, which sizes o_proj from the nominal heads");
    if (c.topk != 1) fail("config: moe_router_topk (", c.topk, ") must be 1 for the released HF ZAYA code");
  }
  ZAYA_CHECK(dtype == DType::F32 || dtype == DType::BF16, "export dtype must be F32 or BF16");
  ZAYA_CHECK(m.layout.experts.count() == c.num_experts, "export needs all experts in one process");
  fs::create_directories(dir);
  // Shard plan: tensors in table order, a new shard when the next would overflow.
  struct Item { const ParamInfo* p; const T* data; };
  std::vector<Item> items;
  for (auto& p : m.layout.params.params) items.push_back({&p, m.params.data() + p.offset});
  for (auto& p : m.layout.buffers.params) items.push_back({&p, m.buffers.data() + p.offset});
  std::vector<std::vector<Item>> shards(1);
  size_t cur = 0, total = 0;
  for (auto& it : items) {
    size_t bytes = it.p->numel * dtype_size(it.p->name.find("balancing_biases") != std::string::npos ? DType::F32 : dtype);
    if (max_shard_bytes && cur + bytes > max_shard_bytes && !shards.back().empty()) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(it);
    cur += bytes;
    total += bytes;
  }
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string fn = shards.size() == 1 ? "model.safetensors"
                                        : cat("model-", std::string(5 - std::to_string(s + 1).size(), '0'), s + 1,
                                              "-of-", std::string(5 - std::to_string(shards.size()).size(), '0'),
                                              shards.size(), ".safetensors");
    SafetensorsWriter w;
    w.set_metadata("format", "pt");
    for (auto& it : shards[s]) {
      // Balancing biases stay fp32: they steer discrete choices and are tiny.
      DType dt = it.p->name.find("balancing_biases") != std::string::npos ? DType::F32 : dtype;
      if constexpr (std::is_same_v<T, float>)
        w.add_float(it.p->name, dt, it.p->shape, it.data);
      else
        w.add_double(it.p->name, dt, it.p->shape, it.data);
      weight_map[it.p->name] = fn;
    }
    w.write((fs::path(dir) / fn).string());
  }
  if (shards.size() > 1) {
    json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::string s = idx.dump(2);
    write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(), s.data(), s.size());
  }
  json cfg = c.to_hf_json();
  cfg["torch_dtype"] = dtype == DType::BF16 ? "bfloat16" : "float32";
  std::string cs = cfg.dump(2);
  write_file_atomic((fs::path(dir) / "config.json").string(), cs.data(), cs.size());
  json gen = {{"bos_token_id", c.bos_token_id}, {"eos_token_id", c.eos_token_id}, {"pad_token_id", c.pad_token_id}};
  std::string gs = gen.dump(2);
  write_file_atomic((fs::path(dir) / "generation_config.json").string(), gs.data(), gs.size());
}

template void load_hf_weights<float>(const std::string&, Model<float>&);
template void load_hf_weights<double>(const std::string&, Model<double>&);
template void save_hf_dir<float>(const std::string&, const Model<float>&, DType, size_t, bool);
template void save_hf_dir<double>(const std::string&, const Model<double>&, DType, size_t, bool);

}  // namespace zaya
