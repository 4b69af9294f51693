#include "quant/convert/quantize_model.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_mmap.h"
#include "ckpt/tokenizer_files.h"
#include "core/bf16.h"
#include "core/io.h"
#include "core/log.h"
#include "core/timer.h"
#include "model/config.h"
#include "model/params.h"
#include "model/weights.h"
#include "quant/gguf.h"
#include "data/tokenizer.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;
using quant::QType;

namespace {

bool keep_matches(const std::string& name, bool embedding, const std::vector<std::string>& keep) {
  for (const std::string& k : keep) {
    if (embedding && (k == "lm_head" || k == "embed" || k == "token_embd" || k == "embed_tokens")) return true;
    if (!k.empty() && name.find(k) != std::string::npos) return true;
  }
  return false;
}

// The type that fits rows of K for `t` (llama.cpp's fallbacks), with the reason when it moved.
QType fitting_type(QType t, int64_t K) {
  while (K % quant::qtype_block(t)) {
    if (t == QType::Q4_K) t = QType::Q4_0;
    else if (t == QType::Q6_K) t = QType::Q8_0;
    else t = QType::BF16;
  }
  return t;
}

// tokenizer.ggml.* from a SentencePiece model (llama.cpp's "llama" tokenizer: pieces,
// scores, token types) or a tokenizer.json ("gpt2" with its merges when it is BPE,
// otherwise the pieces as "llama" without scores).
void tokenizer_metadata(quant::GgufWriter& w, const std::string& path, int vocab) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // 1 normal, 2 unknown, 3 control, 5 unused, 6 byte
  auto tok = load_tokenizer(path);
  // Ids past the embedding would make a file that generate and eval refuse (checked before
  // anything is written).
  if (tok->vocab_size() > vocab)
    fail("tokenizer ", path, " has ", tok->vocab_size(), " pieces but the model's vocabulary is ", vocab);
  if (!is_tokenizer_json(path)) {
    sentencepiece::SentencePieceProcessor sp;
    const auto st = sp.Load(path);
    if (!st.ok()) fail(path, ": ", st.ToString());
    for (int i = 0; i < sp.GetPieceSize(); ++i) {
      tokens.push_back(sp.IdToPiece(i));
      scores.push_back(sp.GetScore(i));
      types.push_back(sp.IsUnknown(i) ? 2 : sp.IsControl(i) ? 3 : sp.IsUnused(i) ? 5 : sp.IsByte(i) ? 6 : 1);
    }
    w.kv_string("tokenizer.ggml.model", "llama");
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_f32s("tokenizer.ggml.scores", scores);
    w.kv_i32s("tokenizer.ggml.token_type", types);
  } else {
    std::ifstream f(path);
    json j = json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail(path, ": not a JSON object");
    for (int i = 0; i < tok->vocab_size(); ++i) {
      tokens.push_back(tok->id_to_piece(i));
      types.push_back(i == tok->unk_id() ? 2 : (i == tok->bos_id() || i == tok->eos_id() || i == tok->pad_id()) ? 3 : 1);
    }
    std::vector<std::string> merges;
    if (j.contains("model") && j["model"].is_object() && j["model"].value("type", "") == "BPE" &&
        j["model"].contains("merges") && j["model"]["merges"].is_array())
      for (const auto& m : j["model"]["merges"]) {
        if (m.is_string()) merges.push_back(m.get<std::string>());
        else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
          merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      }
    w.kv_string("tokenizer.ggml.model", merges.empty() ? "llama" : "gpt2");
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_i32s("tokenizer.ggml.token_type", types);
    if (!merges.empty()) w.kv_strings("tokenizer.ggml.merges", merges);
  }
  if (tok->bos_id() >= 0) w.kv_u32("tokenizer.ggml.bos_token_id", uint32_t(tok->bos_id()));
  if (tok->eos_id() >= 0) w.kv_u32("tokenizer.ggml.eos_token_id", uint32_t(tok->eos_id()));
  if (tok->unk_id() >= 0) w.kv_u32("tokenizer.ggml.unknown_token_id", uint32_t(tok->unk_id()));
  if (tok->pad_id() >= 0) w.kv_u32("tokenizer.ggml.padding_token_id", uint32_t(tok->pad_id()));
}

// llama.cpp's general.file_type (llama_ftype) for a mix.
uint32_t file_type(QType t) {
  switch (t) {
    case QType::Q8_0: return 7;   // MOSTLY_Q8_0
    case QType::Q4_0: return 2;   // MOSTLY_Q4_0
    case QType::Q4_K: return 14;  // MOSTLY_Q4_K_S: q4_k matrices, q6_k output
    default: return 32;           // MOSTLY_BF16
  }
}

// Drops this process's pages of a mapped source range (the page cache keeps them).
void release_pages(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), lo = (a + 4095) / 4096 * 4096, hi = (a + n) / 4096 * 4096;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace

QType quantize_tensor_type(const std::string& name, int ndims, bool embedding, bool buffer, QType type,
                           const std::vector<std::string>& keep) {
  if (buffer) return QType::F32;  // the balancing biases: f32 as trained
  // The router stays bf16 but for its down-projection ([R, D]: in ZAYA1-base as large as a KV
  // projection, 4.5% of a q4_k decode step's bytes in bf16); its MLP (R x R twice, NC x R) and
  // vectors are small.
  const bool router = name.find(".router.") != std::string::npos;
  if (ndims != 2 || (router && name.find(".router.down_proj.") == std::string::npos)) return QType::BF16;
  if (keep_matches(name, embedding, keep)) return QType::BF16;
  if (embedding) return type == QType::Q8_0 ? QType::Q8_0 : QType::Q6_K;
  return type;
}

QuantizeSummary quantize_model(const std::string& src, const std::string& dst, const QuantizeOptions& o) {
  ZAYA_CHECK(o.type == QType::Q8_0 || o.type == QType::Q4_0 || o.type == QType::Q4_K,
             "--type must be q8_0, q4_0 or q4_k");
  Timer timer;
  QuantizeSummary sum;
  // The source: an HF directory (mapped, never populated) or a training checkpoint (loaded).
  ModelConfig cfg;
  WeightStore store;
  std::unique_ptr<Model<float>> model;
  std::string tok_path;
  json config;
  if (fs::is_directory(src) && fs::exists(fs::path(src) / "config.json")) {
    if (is_gguf_model_dir(src)) fail(src, ": already quantized (model.gguf); quantize the bf16 or fp32 model");
    cfg = load_model_config(src);
    store = open_hf_weights(src, false);
    tok_path = find_model_tokenizer(src);
    std::ifstream f(fs::path(src) / "config.json");
    config = json::parse(f, nullptr, false);
    if (!config.is_object()) config = cfg.to_hf_json();
  } else {
    Checkpoint ck(src);
    cfg = checkpoint_model_config(ck);
    model = std::make_unique<Model<float>>(cfg);
    load_checkpoint_model(ck, *model);
    store = WeightStore::from_model(*model);
    tok_path = checkpoint_tokenizer(ck);
    config = cfg.to_hf_json();
  }
  if (!o.tokenizer.empty()) tok_path = o.tokenizer;
  if (tok_path.empty())  // a random-weight benchmark model has none
    log_warn(src, ": no tokenizer (tokenizer.json / tokenizer.model; --tokenizer names one): the quantized model has none");
  if (fs::exists(dst) && !(fs::is_directory(dst) && fs::is_empty(dst)) && !o.force)
    fail(dst, ": exists (pass --force to replace it)");

  // Plan: every tensor of the layout, its type in the file.
  const ModelLayout L = build_layout(cfg);
  struct Item {
    const ParamInfo* p;
    const WeightView* v;
    QType type;
    int64_t K;
    size_t rows;
  };
  std::vector<Item> items;
  quant::GgufWriter w;
  for (int pass = 0; pass < 2; ++pass)
    for (const ParamInfo& p : (pass ? L.buffers : L.params).params) {
      const WeightView* v = store.find(p.name);
      if (!v && pass == 1) continue;  // balancing biases absent: the model starts from the initial ones
      if (!v) fail(src, ": missing tensor '", p.name, "'");
      if (v->shape != p.shape) fail(v->where, ": tensor '", p.name, "' has the wrong shape for the config");
      if (v->dtype != WeightDType::F32 && v->dtype != WeightDType::BF16)
        fail(v->where, ": tensor '", p.name, "' is ", dtype_name(v->dtype), "; quantize reads f32 or bf16");
      const bool emb = p.role == ParamRole::Embedding;
      const int64_t K = p.shape.back();
      const QType want = quantize_tensor_type(p.name, int(p.shape.size()), emb, pass == 1, o.type, o.keep);
      const QType t = fitting_type(want, K);
      if (t != want)
        sum.fallbacks.push_back(cat(p.name, ": ", quant::qtype_name(uint32_t(want)), " -> ", quant::qtype_name(uint32_t(t)),
                                    " (row of ", K, " is not a multiple of ", quant::qtype_block(want), ")"));
      items.push_back({&p, v, t, K, p.numel / size_t(K)});
      sum.src_bytes += v->bytes();
    }

  w.kv_string("general.architecture", "zaya");
  w.kv_string("general.name", cfg.name);
  w.kv_u32("general.file_type", file_type(o.type));
  w.kv_u32("general.quantization_version", 2);
  w.kv_u32("general.alignment", quant::kGgufAlignment);
  w.kv_u32("zaya.context_length", uint32_t(cfg.max_position_embeddings));
  w.kv_u32("zaya.embedding_length", uint32_t(cfg.hidden_size));
  w.kv_u32("zaya.block_count", uint32_t(cfg.num_sublayers()));
  w.kv_u32("zaya.feed_forward_length", uint32_t(cfg.ffn_hidden_size));
  w.kv_u32("zaya.attention.head_count", uint32_t(cfg.num_q_heads));
  w.kv_u32("zaya.attention.head_count_kv", uint32_t(cfg.num_kv_heads));
  w.kv_u32("zaya.attention.key_length", uint32_t(cfg.head_dim));
  w.kv_f32("zaya.attention.layer_norm_rms_epsilon", float(cfg.norm_eps));
  w.kv_u32("zaya.rope.dimension_count", uint32_t(cfg.rotary_dim()));
  w.kv_f32("zaya.rope.freq_base", float(cfg.rope_theta));
  w.kv_u32("zaya.expert_count", uint32_t(cfg.num_experts));
  w.kv_u32("zaya.expert_used_count", uint32_t(cfg.topk));
  w.kv_u32("zaya.vocab_size", uint32_t(cfg.vocab_size));
  w.kv_string("zaya.config", config.dump());  // the HF config.json the model is read with
  w.kv_string("zaya.quantize.type", quant::qtype_name(uint32_t(o.type)));
  w.kv_strings("zaya.quantize.fallbacks", sum.fallbacks);
  w.kv_strings("zaya.quantize.keep", o.keep);
  if (!tok_path.empty()) tokenizer_metadata(w, tok_path, cfg.vocab_size);
  for (const Item& it : items) {
    std::vector<int64_t> ne(it.p->shape.rbegin(), it.p->shape.rend());
    sum.dst_bytes += w.add_tensor(quant::gguf_name_from_hf(it.p->name), ne, it.type);
  }

  // Write into a fresh directory beside DST, published in its place when complete.
  StagedDir stage(dst);
  stage.create();
  const fs::path tmp(stage.tmp());
  w.begin((tmp / "model.gguf").string());
  const size_t rows_per_piece = 4096;
  std::vector<uint8_t> piece;
  uint64_t done = 0;
  Timer since;
  for (size_t ii = 0; ii < items.size(); ++ii) {
    const Item& it = items[ii];
    const size_t rb = quant::qtype_row_bytes(it.type, it.K);
    const size_t src_rb = weight_bytes(it.v->dtype, 1, it.K);
    const uint8_t* base = static_cast<const uint8_t*>(it.v->data);
    for (size_t r0 = 0; r0 < it.rows; r0 += rows_per_piece) {
      const size_t nr = std::min(rows_per_piece, it.rows - r0);
      piece.resize(nr * rb);
#pragma omp parallel if (nr * size_t(it.K) > 65536)
      {
        std::vector<float> row(static_cast<size_t>(it.K));
#pragma omp for schedule(static)
        for (size_t r = 0; r < nr; ++r) {
          const uint8_t* s = base + (r0 + r) * src_rb;
          if (it.v->dtype == WeightDType::BF16)
            for (int64_t k = 0; k < it.K; ++k) {
              bf16 h;
              std::memcpy(&h, s + 2 * k, 2);
              row[size_t(k)] = from_bf16(h);
            }
          else
            std::memcpy(row.data(), s, size_t(it.K) * 4);
          quant::quantize_row(it.type, row.data(), piece.data() + r * rb, it.K);
        }
      }
      w.write(piece.data(), piece.size());
      if (!model) release_pages(base + r0 * src_rb, nr * src_rb);
    }
    done += it.v->bytes();
    if (o.progress && o.on_progress && (since.seconds() > 5 || ii + 1 == items.size())) {
      o.on_progress({ii + 1, items.size(), done, sum.src_bytes, timer.seconds()});
      since = Timer();
    }
  }
  w.finish();
  // config.json (with what was done, for people), the tokenizer files.
  config["quantization_config"] = {{"quant_method", "gguf"}, {"type", quant::qtype_name(uint32_t(o.type))},
                                   {"file", "model.gguf"}};
  const std::string cs = config.dump(2);
  write_file_atomic((tmp / "config.json").string(), cs.data(), cs.size());
  if (!tok_path.empty())
    for (const auto& [from, name] : tokenizer_files(tok_path)) fs::copy_file(from, tmp / name);
  stage.commit();
  sum.tensors = items.size();
  sum.seconds = timer.seconds();
  sum.peak_rss = peak_rss_bytes();
  return sum;
}

}  // namespace zaya
