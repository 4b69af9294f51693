// The scoring engine behind `zaya eval` and `zaya score`: log-probabilities of continuations
// after a context, through the in-place inference decoder (model/infer.h: bf16 weights as
// stored, or fp32 views of a Model<float>). Requests run longest first; each context is
// prefilled once (batch 1) and its state copied into one decoder row per continuation; the
// rows of several requests (each at its own position) are fed together, up to `batch` rows.
// `zaya score` goes through the same calls, so its numbers and eval's agree to the bit.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/infer.h"
#include "model/model.h"
#include "data/tokenizer.h"

namespace zaya::eval {

struct ContinuationScore {
  std::vector<double> logprobs;  // one per continuation token
  bool greedy = true;            // every token was the argmax of its logits
  double sum() const;            // summed in order (a double)
};

struct EngineStats {
  uint64_t context_tokens = 0, continuation_tokens = 0, generated_tokens = 0;
  uint64_t contexts = 0, continuations = 0;
  uint64_t waves = 0;       // groups of continuation rows fed together
  uint64_t row_tokens = 0;  // positions fed as continuation rows, padding included
  double prefill_s = 0, rows_s = 0;  // seconds in context prefill / in continuation rows
};

// One context and its continuations (pointers: the caller keeps them alive during the call).
struct ScoreRequest {
  const std::vector<int32_t>* ctx = nullptr;
  const std::vector<std::vector<int32_t>>* conts = nullptr;
};

class Engine {
 public:
  // batch: continuation rows fed together; max_len: the longest context + continuation
  // that will be scored (<= max_position_embeddings; decoders are sized to it).
  Engine(const InferModel& m, int batch, int max_len);
  const ModelConfig& cfg() const { return m_.cfg(); }
  int max_len() const { return max_len_; }
  // ctx (>= 1 token) then each continuation (>= 1 token): ctx + continuation - 1 <= max_len
  // positions (the last continuation token is a target only).
  std::vector<ContinuationScore> score(const std::vector<int32_t>& ctx, const std::vector<std::vector<int32_t>>& conts);
  // Many requests together, results in the order of reqs. Requests run longest first
  // (context + longest continuation, lm-eval's order); each context is prefilled once and its
  // continuations take free rows, across requests, up to `batch` rows per feed (a wave). A
  // wave's rows are padded to its longest continuation, and a row joins a wave only if the
  // wave's longest context + longest continuation still fits max_len. progress(done) after
  // each wave: the requests whose continuations are all scored.
  std::vector<std::vector<ContinuationScore>> score_many(const std::vector<ScoreRequest>& reqs,
                                                         const std::function<void(size_t)>& progress = {});
  // Greedy decoding after ctx: up to max_new tokens, stopping early when stop(generated)
  // says so (stop strings, EOS). ctx + max_new <= max_len.
  std::vector<int32_t> generate(const std::vector<int32_t>& ctx, int max_new,
                                const std::function<bool(const std::vector<int32_t>&)>& stop);
  const EngineStats& stats() const { return stats_; }

  static constexpr int kChunk = 512;      // positions per forward (activation memory)
  static constexpr int kFeedRows = 2048;  // rows x positions per continuation feed, at most

 private:
  InferDecoder& decoder(int batch);
  const float* prefill(InferDecoder& d, const std::vector<int32_t>& ctx);

  const InferModel& m_;
  int batch_, max_len_;
  std::unique_ptr<InferDecoder> ctx_dec_;               // the shared context, batch 1
  std::map<int, std::unique_ptr<InferDecoder>> dec_;  // continuation rows, by batch
  EngineStats stats_;
};

// log p(target) from one row of logits, as InferDecoder::logprobs computes it (double sums).
double token_logprob(const float* z, int V, int target, bool* is_argmax);

// A model opened for scoring: HF bf16 in place (open_hf_weights), else an fp32 Model<float>
// (HF --fp32, or a zaya checkpoint) seen through fp32 views.
struct LoadedModel {
  ModelConfig cfg;
  std::unique_ptr<Model<float>> fp32;
  std::unique_ptr<InferModel> im;
  std::string tokenizer;  // path found next to the weights (empty: none)
  std::string name;       // the --model / --ckpt argument
};
LoadedModel open_model(const std::string& hf_dir, const std::string& ckpt, bool fp32);

}  // namespace zaya::eval
