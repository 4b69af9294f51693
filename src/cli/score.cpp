// zaya score (--model DIR | --ckpt DIR) (--ids FILE | --text FILE) [--context N] [--json]:
// log-probability of each next token under a model, and the mean loss. The scoring is
// zaya eval's (eval/engine.h): the first N tokens (default 1) are the context, prefilled
// once, and the rest a continuation; a choice's loglikelihood in `zaya eval` is this sum.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "eval/engine.h"
#include "data/tokenizer.h"

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
  int context = 1;
  bool json = false;
  bool fp32 = false;  // HF bf16 weights: load an fp32 copy instead of using them in place
};

void run(const Opts& o) {
  if (o.model.empty() == o.ckpt.empty()) zaya::fail("give exactly one of --model DIR (HF format) or --ckpt DIR (zaya)");
  if (o.ids.empty() == o.text.empty()) zaya::fail("give exactly one of --ids FILE or --text FILE");
  zaya::eval::LoadedModel lm = zaya::eval::open_model(o.model, o.ckpt, o.fp32);
  const zaya::ModelConfig& cfg = lm.cfg;
  std::vector<int32_t> ids;
  std::string ids_path = o.ids;
  if (!o.text.empty()) {  // tokenize with --tokenizer, else the run's / directory's own tokenizer
    const std::string tok = o.tokenizer.empty() ? lm.tokenizer : o.tokenizer;
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
    if (int(ids.size()) > cfg.max_position_embeddings + 1)
      zaya::fail(ids_path, ": ", ids.size(), " token ids; the model scores at most ", cfg.max_position_embeddings + 1);
  }
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= cfg.vocab_size)
      zaya::fail(ids_path, ": token id ", ids[i], " at index ", i, " is outside the vocabulary (", cfg.vocab_size, ")");
  if (o.context < 1 || o.context >= int(ids.size()))
    zaya::fail("--context ", o.context, ": must be in [1, ", ids.size() - 1, "] for ", ids.size(), " tokens");
  const std::vector<int32_t> ctx(ids.begin(), ids.begin() + o.context), cont(ids.begin() + o.context, ids.end());
  zaya::eval::Engine eng(*lm.im, 1, int(ids.size()) - 1);
  const zaya::eval::ContinuationScore s = eng.score(ctx, {cont})[0];
  const int T = int(s.logprobs.size());
  const double sum = s.sum(), loss = -sum / T;
  if (o.json) {
    nlohmann::json j = {{"logprobs", s.logprobs}, {"sum", sum},          {"is_greedy", s.greedy},
                        {"context", o.context},   {"loss", loss},        {"tokens", T},
                        {"perplexity", std::exp(loss)}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%6s %10s %12s\n", "pos", "next_id", "logprob");
  for (int t = 0; t < T; ++t) std::printf("%6d %10d %12.6f\n", o.context + t, ids[size_t(o.context + t)], s.logprobs[size_t(t)]);
  std::printf("loss %.6f nats/token over %d tokens (perplexity %.3f)\n", loss, T, std::exp(loss));
}

}  // namespace

ZAYA_COMMAND("score", "Log-probabilities of tokens under a model, mean loss and perplexity", [](CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--model", o->model, "HF-format model directory (config.json + safetensors)");
  app.add_option("--ckpt", o->ckpt, "zaya checkpoint (a step directory, its root, its `latest` file or a run directory)");
  app.add_option("--ids", o->ids, "file of whitespace-separated token ids");
  app.add_option("--text", o->text, "raw text file, tokenized with the run's (or --tokenizer) tokenizer");
  app.add_option("--tokenizer", o->tokenizer, "tokenizer.json or SentencePiece .model for --text");
  app.add_option("--context", o->context,
                 "the first N tokens are the context, prefilled once (zaya eval's shared context); default 1");
  app.add_flag("--fp32", o->fp32, "HF dir with bf16 weights: load an fp32 copy (default: use them in place)");
  app.add_flag("--json", o->json, "print {\"logprobs\": [...], \"sum\": s, \"loss\": x, \"tokens\": n}");
  app.callback([o] { run(*o); });
});
