// zaya generate --ckpt DIR --prompt "..." [--temperature T] [--top-k K] [--top-p P] [--seed S]
//               [--max-tokens N] [--tokenizer MODEL] [--kv bf16|fp32]: sample a continuation
// with the incremental decoder (prefill, then one token at a time), streaming the text.
// DIR: a training checkpoint (step dir, its root, or the run dir), an HF directory, or a
// quantized directory (zaya quantize), whose weights are used in place.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"
#include "model/decode.h"
#include "model/infer.h"
#include "data/tokenizer.h"

namespace {
namespace fs = std::filesystem;

struct GenArgs {
  std::string ckpt, prompt, tokenizer;
  double temperature = 0.8, top_p = 0.95;
  int top_k = 50, max_tokens = 128;
  uint64_t seed = 1;
  bool no_prefix = false;
  bool fp32 = false;  // HF bf16 weights: load an fp32 copy instead of using them in place
  std::string kv = "bf16";  // the in-place decoder's KV cache
  bool profile = false;     // where the decode steps go, per thread (in-place decoder, 2+ threads)
};

// Temperature, then top-k, then top-p (nucleus) over the survivors; temperature 0: argmax.
int sample(const float* logits, int V, const GenArgs& a, zaya::Philox& rng, std::vector<int>& idx,
           std::vector<double>& p) {
  if (a.temperature <= 0) return int(std::max_element(logits, logits + V) - logits);
  idx.resize(size_t(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = a.top_k > 0 ? std::min(a.top_k, V) : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int x, int y) { return logits[x] > logits[y]; });
  p.resize(size_t(k));
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += p[size_t(i)] = std::exp((logits[idx[size_t(i)]] - logits[idx[0]]) / a.temperature);
  int keep = k;
  double acc = 0;
  for (int i = 0; i < k; ++i) {
    acc += p[size_t(i)] / sum;
    if (acc >= a.top_p) {
      keep = i + 1;
      break;
    }
  }
  double total = 0;
  for (int i = 0; i < keep; ++i) total += p[size_t(i)];
  double u = rng.uniform() * total;
  for (int i = 0; i < keep; ++i)
    if ((u -= p[size_t(i)]) < 0) return idx[size_t(i)];
  return idx[size_t(keep - 1)];
}

void run(const GenArgs& a) {
  std::unique_ptr<zaya::Model<float>> model;
  std::unique_ptr<zaya::InferModel> inplace;  // bf16 HF weights, memory-mapped
  std::string tok_path = a.tokenizer;
  if (fs::exists(fs::path(a.ckpt) / "config.json")) {  // an HF directory
    if (a.fp32 && zaya::is_gguf_model_dir(a.ckpt))
      zaya::fail(a.ckpt, ": a quantized directory runs in place only (--fp32 reads bf16/fp32 safetensors)");
    if (!a.fp32 && zaya::hf_weights_are_bf16(a.ckpt)) {
      inplace = std::make_unique<zaya::InferModel>(zaya::load_model_config(a.ckpt), zaya::open_hf_weights(a.ckpt));
    } else {
      model = std::make_unique<zaya::Model<float>>(zaya::load_model_config(a.ckpt));
      zaya::load_hf_weights(a.ckpt, *model);
    }
    if (tok_path.empty()) tok_path = zaya::find_model_tokenizer(a.ckpt);  // tokenizer.json, else .model
  } else {
    zaya::Checkpoint ck(a.ckpt);
    model = std::make_unique<zaya::Model<float>>(zaya::checkpoint_model_config(ck));
    zaya::load_checkpoint_model(ck, *model);
    if (tok_path.empty()) tok_path = zaya::checkpoint_tokenizer(ck);
  }
  ZAYA_CHECK(!tok_path.empty(), a.ckpt, ": no tokenizer.json or tokenizer.model there; pass --tokenizer");
  auto tok = zaya::load_tokenizer(tok_path);
  const zaya::ModelConfig& cfg = inplace ? inplace->cfg() : model->cfg();
  const int V = cfg.vocab_size;
  ZAYA_CHECK(tok->vocab_size() <= V, "tokenizer ", tok_path, " has ", tok->vocab_size(),
             " pieces but the model's vocabulary is ", V);
  // The prompt starts as the model's training documents did: after an EOS for models trained
  // here, with the BOS a tokenizer.json asks for (unless --no-prefix).
  std::vector<int32_t> ids;
  if (!a.no_prefix) ids = tok->document_prefix();
  const size_t first = ids.size();  // not shown
  for (int32_t t : tok->encode(a.prompt)) ids.push_back(t);
  ZAYA_CHECK(!ids.empty(), "--prompt is empty and the tokenizer has no BOS/EOS to start from");
  // Generation ends at the tokenizer's EOS or the model config's eos_token_id (Gemma3's
  // tokenizer_config names <end_of_turn>, the base model ends documents with <eos>).
  auto is_stop = [&](int id) { return id == tok->eos_id() || id == cfg.eos_token_id; };
  const int max_len = std::min<int>(int(ids.size()) + a.max_tokens, cfg.max_position_embeddings);
  ZAYA_CHECK(int(ids.size()) < max_len, "prompt of ", ids.size(), " tokens leaves no room under max_position_embeddings ",
             cfg.max_position_embeddings);

  std::unique_ptr<zaya::Decoder<float>> dec32;
  std::unique_ptr<zaya::InferDecoder> dec16;
  if (inplace)
    dec16 = std::make_unique<zaya::InferDecoder>(*inplace, 1, max_len,
                                                 a.kv == "fp32" ? zaya::KvCacheDType::F32 : zaya::KvCacheDType::BF16);
  else
    dec32 = std::make_unique<zaya::Decoder<float>>(*model, 1, max_len);
  auto feed = [&](const int32_t* t, int n) { return dec16 ? dec16->feed(t, n) : dec32->feed(t, n); };
  zaya::Philox rng(a.seed, zaya::hash_name("zaya.generate"));
  std::vector<int> idx;
  std::vector<double> p;
  zaya::Timer timer;
  const float* logits = feed(ids.data(), int(ids.size()));
  const double prompt_s = timer.seconds();
  zaya::DecodeProfile prof;
  if (a.profile && dec16) dec16->set_profile(&prof);  // the steps after the prompt
  std::vector<int32_t> shown(ids.begin() + long(first), ids.end());
  std::string printed = tok->decode(shown);
  std::printf("%s", printed.c_str());
  int generated = 0;
  while (generated < a.max_tokens) {
    // Only ids the tokenizer has: a model's vocabulary is often padded past it (ZAYA1:
    // 262,272 rows for Gemma3's pieces), and the padding rows' logits are not trained.
    int next = sample(logits, tok->vocab_size(), a, rng, idx, p);
    ++generated;
    if (is_stop(next)) break;
    shown.push_back(next);
    std::string text = tok->decode(shown);  // re-decode: pieces may merge across tokens
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0)
      std::printf("%s", text.c_str() + printed.size());
    printed = std::move(text);
    std::fflush(stdout);
    if (generated == a.max_tokens || (dec16 ? dec16->pos() : dec32->pos()) >= max_len) break;
    int32_t t = next;
    logits = feed(&t, 1);
  }
  std::printf("\n");
  std::fflush(stdout);  // the text before the rates on stderr, also when both go to one file
  // As llama.cpp reports it: the prompt's prefill, then the generated tokens (one step each
  // after the first, which the prefill's logits give).
  const double gen_s = timer.seconds() - prompt_s;
  std::fprintf(stderr, "[prompt %zu tokens in %.2f s (%.1f tokens/s); generated %d tokens in %.2f s (%.1f tokens/s)]\n",
               ids.size(), prompt_s, double(ids.size()) / std::max(prompt_s, 1e-9), generated, gen_s,
               generated / std::max(gen_s, 1e-9));
  if (a.profile) {
    if (!dec16)
      std::fprintf(stderr, "--profile: the fp32 decoder (--fp32 or a training checkpoint) is not profiled\n");
    else if (prof.tokens() == 0)
      std::fprintf(stderr, "--profile: no decode step ran as a team (one thread, or no step after the prompt)\n");
    else
      std::fprintf(stderr, "%s", prof.table().c_str());
  }
}

}  // namespace

ZAYA_COMMAND("generate", "Sample text from a checkpoint (temperature, top-k, top-p) with incremental decoding",
             [](CLI::App& app) {
               auto a = std::make_shared<GenArgs>();
               app.add_option("--ckpt", a->ckpt, "training checkpoint (step dir, ckpt root, its `latest` file or run dir) or HF dir")
                   ->required();
               app.add_option("--prompt", a->prompt, "text to continue")->required();
               app.add_option("--temperature", a->temperature, "softmax temperature (0: greedy)")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--top-k", a->top_k, "keep the k most likely tokens (0: all)")
                   ->capture_default_str()
                   ->check(CLI::NonNegativeNumber);
               app.add_option("--top-p", a->top_p, "nucleus: keep the smallest set with this much probability")
                   ->capture_default_str()
                   ->check(CLI::Range(0.0, 1.0));
               app.add_option("--seed", a->seed, "sampling seed")->capture_default_str();
               app.add_option("--max-tokens", a->max_tokens, "tokens to generate at most")
                   ->capture_default_str()
                   ->check(CLI::PositiveNumber);
               app.add_option("--tokenizer", a->tokenizer, "tokenizer.json or SentencePiece .model (default: the checkpoint's)");
               app.add_flag("--no-prefix,--no-eos-prefix", a->no_prefix,
                            "do not start the context with the document prefix (EOS, or a tokenizer.json's BOS)");
               app.add_flag("--fp32", a->fp32, "HF dir with bf16 weights: load an fp32 copy (default: use them in place)");
               app.add_option("--kv", a->kv, "KV cache of the in-place decoder: bf16 (half the bytes) or fp32 (checks)")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"bf16", "fp32"}));
               app.add_flag("--profile", a->profile,
                            "print where the decode steps go per thread: products and their GB/s, the LM head, "
                            "one thread's work, waits");
               app.callback([a] { run(*a); });
             });
