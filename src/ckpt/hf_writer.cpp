#include "ckpt/hf_writer.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

}  // namespace

void check_hf_compatible(const ModelConfig& c) {
  if (c.num_q_heads * 2 != c.num_attention_heads)
    fail("config: cca_num_q_heads (", c.num_q_heads, ") must be num_attention_heads / 2 (", c.num_attention_heads,
         ") for the released HF ZAYA code, which sizes o_proj from the nominal heads");
  if (c.topk != 1) fail("config: moe_router_topk (", c.topk, ") must be 1 for the released HF ZAYA code");
}

uint64_t HfTensorSource::bytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

HfWriter::HfWriter(const ModelConfig& cfg, const HfWriteOptions& o) : cfg_(cfg), o_(o) {
  if (o_.check_hf_compat) check_hf_compatible(cfg_);
  ZAYA_CHECK(o_.dtype == DType::F32 || o_.dtype == DType::BF16, "export dtype must be F32 or BF16");
}

void HfWriter::add(HfTensorSource t) { tensors_.push_back(std::move(t)); }

HfWriteSummary HfWriter::write(const std::string& dir) const {
  // Shard plan: tensors in the order added, a new shard when the next would overflow.
  std::vector<std::vector<const HfTensorSource*>> shards(1);
  uint64_t cur = 0;
  HfWriteSummary sum;
  for (const HfTensorSource& t : tensors_) {
    const uint64_t b = t.bytes();
    if (o_.max_shard_bytes && cur + b > o_.max_shard_bytes && !shards.back().empty()) shards.emplace_back(), cur = 0;
    shards.back().push_back(&t);
    cur += b, sum.data_bytes += b;
  }
  fs::create_directories(dir);
  const std::string nl = o_.final_newline ? "\n" : "";
  json weight_map = json::object();
  std::vector<uint8_t> buf;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string fn = shards.size() == 1 ? "model.safetensors" : shard_name(s, shards.size());
    std::vector<TensorEntry> entries;
    uint64_t off = 0;
    for (const HfTensorSource* t : shards[s]) {
      TensorEntry e;
      e.name = t->name;
      e.dtype = t->dtype;
      e.shape = t->shape;
      e.begin = off;
      e.end = off += t->bytes();
      entries.push_back(std::move(e));
      weight_map[t->name] = fn;
    }
    AtomicFile f((fs::path(dir) / fn).string());
    const std::string head = safetensors_header(entries, {{"format", "pt"}});
    f.write(head.data(), head.size());
    for (const HfTensorSource* t : shards[s]) {
      buf.resize(t->bytes());
      t->fill(buf.data());
      f.write(buf.data(), buf.size());
    }
    sum.file_bytes += f.size();
    f.commit();
    ++sum.files;
  }
  if (shards.size() > 1)
    write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(),
                      json{{"metadata", {{"total_size", sum.data_bytes}}}, {"weight_map", weight_map}}.dump(2) + nl);
  json config = cfg_.to_hf_json();
  config["torch_dtype"] = o_.dtype == DType::BF16 ? "bfloat16" : "float32";
  write_file_atomic((fs::path(dir) / "config.json").string(), config.dump(2) + nl);
  if (o_.generation_config)
    write_file_atomic((fs::path(dir) / "generation_config.json").string(),
                      json{{"bos_token_id", cfg_.bos_token_id}, {"eos_token_id", cfg_.eos_token_id},
                           {"pad_token_id", cfg_.pad_token_id}}
                              .dump(2) + nl);
  return sum;
}

}  // namespace zaya
