// zaya score --model DIR --ids FILE [--json]: log-probability of each next token under an
// HF-format ZAYA model, and the mean loss.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/hf.h"
#include "cli/command.h"
#include "core/error.h"
#include "model/model.h"

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

void run(const std::string& dir, const std::string& ids_path, bool as_json) {
  zaya::ModelConfig cfg = zaya::load_model_config(dir);
  std::vector<int32_t> ids = read_ids(ids_path);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= cfg.vocab_size)
      zaya::fail(ids_path, ": token id ", ids[i], " at index ", i, " is outside the vocabulary (", cfg.vocab_size, ")");
  zaya::Model<float> m(cfg);
  zaya::load_hf_weights(dir, m);
  const int T = int(ids.size()) - 1;
  auto r = m.forward(ids.data(), ids.data() + 1, 1, T);
  std::vector<double> lp(T);
  for (int t = 0; t < T; ++t) lp[t] = double(m.logits()[size_t(t) * cfg.vocab_size + ids[t + 1]]) - m.lse()[t];
  if (as_json) {
    nlohmann::json j = {{"logprobs", lp}, {"loss", r.loss}, {"tokens", r.count}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%6s %10s %12s\n", "pos", "next_id", "logprob");
  for (int t = 0; t < T; ++t) std::printf("%6d %10d %12.6f\n", t + 1, ids[t + 1], lp[t]);
  std::printf("loss %.6f nats/token over %d tokens (perplexity %.3f)\n", r.loss, r.count, std::exp(r.loss));
}

}  // namespace

ZAYA_COMMAND("score", "Log-probabilities of token ids under a model, and the mean loss", [](CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  app.add_option("--model", *dir, "HF-format model directory (config.json + safetensors)")->required();
  app.add_option("--ids", *ids, "file of whitespace-separated token ids")->required();
  app.add_flag("--json", *as_json, "print {\"logprobs\": [...], \"loss\": x, \"tokens\": n}");
  app.callback([=] { run(*dir, *ids, *as_json); });
});
