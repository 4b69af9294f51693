// zaya score --model DIR --ids FILE [--json]: log-probability of each next token under an
// HF-format ZAYA model, and the mean loss.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "model/infer.h"
#include "model/model.h"
#include "train/tokenizer.h"

namespace {

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  if (!f) zaya::fail(path, ": cannot open");
  std::vector<int32_t> ids;
  std::string tok;
  while (f >> tok) {
    char* end = nullptr;
    long v = std::strtol(tok.c_str(), &end, 10);
    if (*end || tok.empty() || v < 0 || v > INT32_MAX) zaya::fail(path, ": '", tok, "' is not a token id");
    ids.push_back(int32_t(v));
  }
  if (ids.size() < 2) zaya::fail(path, ": needs at least 2 token ids, found ", ids.size());
  return ids;
}

struct Opts {
  std::string model, ckpt, ids, text, tokenizer;
  bool json = false;
  bool fp32 = false;  // HF bf16 weights: load an fp32 copy instead of using them in place
};

void run(const Opts& o) {
  if (o.model.empty() == o.ckpt.empty()) zaya::fail("give exactly one of --model DIR (HF format) or --ckpt DIR (zaya)");
  if (o.ids.empty() == o.text.empty()) zaya::fail("give exactly one of --ids FILE or --text FILE");
  std::unique_ptr<zaya::Checkpoint> ck;
  if (!o.ckpt.empty()) ck = std::make_unique<zaya::Checkpoint>(o.ckpt);
  zaya::ModelConfig cfg = ck ? zaya::checkpoint_model_config(*ck) : zaya::load_model_config(o.model);
  std::vector<int32_t> ids;
  std::string ids_path = o.ids;
  if (!o.text.empty()) {  // tokenize with --tokenizer, else the run's / directory's own tokenizer
    std::string tok = o.tokenizer;
    if (tok.empty() && ck) tok = zaya::checkpoint_tokenizer(*ck);
    if (tok.empty() && !o.model.empty()) tok = zaya::find_model_tokenizer(o.model);  // tokenizer.json, else .model
    if (tok.empty()) zaya::fail("--text needs a tokenizer: pass --tokenizer MODEL");
    std::ifstream f(o.text, std::ios::binary);
    if (!f) zaya::fail(o.text, ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    auto t = zaya::load_tokenizer(tok);
    ids = t->document_prefix();  // as the model's training documents start (tokenizer.h)
    for (int id : t->encode(ss.str())) ids.push_back(id);
    ids_path = o.text;
    if (ids.size() < 2) zaya::fail(o.text, ": no tokens to score");
    if (int(ids.size()) > cfg.max_position_embeddings) {
      zaya::log_warn(o.text, ": ", ids.size(), " tokens; scoring the first ", cfg.max_position_embeddings);
      ids.resize(size_t(cfg.max_position_embeddings));
    }
  } else {
    ids = read_ids(o.ids);
  }
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= cfg.vocab_size)
      zaya::fail(ids_path, ": token id ", ids[i], " at index ", i, " is outside the vocabulary (", cfg.vocab_size, ")");
  const bool as_json = o.json;
  const int T = int(ids.size()) - 1;
  std::vector<double> lp(T);
  zaya::ForwardResult r;
  if (!ck && !o.fp32 && zaya::hf_weights_are_bf16(o.model)) {  // bf16 HF weights, memory-mapped, used in place
    zaya::InferModel im(cfg, zaya::open_hf_weights(o.model));
    zaya::InferDecoder dec(im, 1, int(ids.size()));
    lp = dec.logprobs(ids.data(), int(ids.size()));
    for (double v : lp) r.loss_sum -= v;
    r.count = T;
    r.loss = r.loss_sum / T;
  } else {
    zaya::Model<float> m(cfg);
    if (ck)
      zaya::load_checkpoint_model(*ck, m);
    else
      zaya::load_hf_weights(o.model, m);
    r = m.forward(ids.data(), ids.data() + 1, 1, T);
    for (int t = 0; t < T; ++t) lp[t] = double(m.logits()[size_t(t) * cfg.vocab_size + ids[t + 1]]) - m.lse()[t];
  }
  if (as_json) {
    nlohmann::json j = {{"logprobs", lp}, {"loss", r.loss}, {"tokens", r.count}, {"perplexity", std::exp(r.loss)}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%6s %10s %12s\n", "pos", "next_id", "logprob");
  for (int t = 0; t < T; ++t) std::printf("%6d %10d %12.6f\n", t + 1, ids[t + 1], lp[t]);
  std::printf("loss %.6f nats/token over %d tokens (perplexity %.3f)\n", r.loss, r.count, std::exp(r.loss));
}

}  // namespace

ZAYA_COMMAND("score", "Log-probabilities of tokens under a model, mean loss and perplexity", [](CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--model", o->model, "HF-format model directory (config.json + safetensors)");
  app.add_option("--ckpt", o->ckpt, "zaya checkpoint (a step directory, its root, its `latest` file or a run directory)");
  app.add_option("--ids", o->ids, "file of whitespace-separated token ids");
  app.add_option("--text", o->text, "raw text file, tokenized with the run's (or --tokenizer) tokenizer");
  app.add_option("--tokenizer", o->tokenizer, "tokenizer.json or SentencePiece .model for --text");
  app.add_flag("--fp32", o->fp32, "HF dir with bf16 weights: load an fp32 copy (default: use them in place)");
  app.add_flag("--json", o->json, "print {\"logprobs\": [...], \"loss\": x, \"tokens\": n}");
  app.callback([o] { run(*o); });
});
