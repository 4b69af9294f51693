#include "eval/engine.h"

#include <algorithm>
#include <cmath>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "ckpt/tokenizer_files.h"
#include "core/error.h"

namespace zaya::eval {

double ContinuationScore::sum() const {
  double s = 0;
  for (double v : logprobs) s += v;
  return s;
}

double token_logprob(const float* z, int V, int target, bool* is_argmax) {
  int best = 0;
  for (int v = 1; v < V; ++v)
    if (z[v] > z[best]) best = v;
  const double mx = z[best];
  double s = 0;
  for (int v = 0; v < V; ++v) s += std::exp(double(z[v]) - mx);
  if (is_argmax) *is_argmax = best == target;
  return double(z[target]) - mx - std::log(s);
}

Engine::Engine(const InferModel& m, int batch, int max_len) : m_(m), batch_(batch), max_len_(max_len) {
  ZAYA_CHECK(batch >= 1, "batch must be at least 1");
  ZAYA_CHECK(max_len >= 2 && max_len <= m.cfg().max_position_embeddings, "scoring length ", max_len,
             " outside [2, max_position_embeddings = ", m.cfg().max_position_embeddings, "]");
}

InferDecoder& Engine::decoder(int batch) {
  auto& d = dec_[batch];
  if (!d) d = std::make_unique<InferDecoder>(m_, batch, max_len_);
  return *d;
}

const float* Engine::prefill(InferDecoder& d, const std::vector<int32_t>& ctx) {
  d.reset();
  const float* last = nullptr;
  for (size_t c0 = 0; c0 < ctx.size(); c0 += kChunk)
    last = d.feed(ctx.data() + c0, int(std::min<size_t>(kChunk, ctx.size() - c0)));
  stats_.context_tokens += ctx.size();
  stats_.contexts++;
  return last;
}

std::vector<ContinuationScore> Engine::score(const std::vector<int32_t>& ctx,
                                             const std::vector<std::vector<int32_t>>& conts) {
  const int V = m_.cfg().vocab_size;
  ZAYA_CHECK(!ctx.empty(), "scoring needs at least one context token");
  for (const auto& c : conts) {
    ZAYA_CHECK(!c.empty(), "an empty continuation");
    ZAYA_CHECK(ctx.size() + c.size() - 1 <= size_t(max_len_), "context + continuation of ", ctx.size() + c.size(),
               " tokens exceed ", max_len_);
  }
  std::vector<ContinuationScore> out(conts.size());
  if (!ctx_dec_) ctx_dec_ = std::make_unique<InferDecoder>(m_, 1, max_len_);
  InferDecoder& d1 = *ctx_dec_;
  const float* last = prefill(d1, ctx);
  // The first token of every continuation is predicted by the context's last position.
  for (size_t i = 0; i < conts.size(); ++i) {
    bool g = false;
    out[i].logprobs.push_back(token_logprob(last, V, conts[i][0], &g));
    out[i].greedy = g;
  }
  for (size_t g0 = 0; g0 < conts.size(); g0 += size_t(batch_)) {
    const int B = int(std::min(conts.size() - g0, size_t(batch_)));
    size_t m = 0;  // positions to feed: each continuation but its last token
    for (int b = 0; b < B; ++b) m = std::max(m, conts[g0 + b].size() - 1);
    if (m == 0) continue;
    InferDecoder& d = decoder(B);
    d.copy_rows_from(d1, 0);
    for (size_t c0 = 0; c0 < m; c0 += kChunk) {
      const int w = int(std::min<size_t>(kChunk, m - c0));
      std::vector<int32_t> tok(size_t(B) * w);
      for (int b = 0; b < B; ++b) {
        const auto& c = conts[g0 + b];
        for (int j = 0; j < w; ++j)  // rows past their end repeat the last token (ignored)
          tok[size_t(b) * w + j] = c[std::min(c0 + j, c.size() - 1)];
      }
      d.feed_all_logits(tok.data(), w, [&](int r, const float* z) {
        const int b = r / w, j = r % w;
        const auto& c = conts[g0 + b];
        const size_t t = c0 + j + 1;  // the token this position predicts
        if (t >= c.size()) return;
        bool g = false;
        out[g0 + b].logprobs.push_back(token_logprob(z, V, c[t], &g));
        out[g0 + b].greedy = out[g0 + b].greedy && g;
      });
    }
  }
  for (const auto& c : conts) stats_.continuation_tokens += c.size();
  stats_.continuations += conts.size();
  return out;
}

std::vector<int32_t> Engine::generate(const std::vector<int32_t>& ctx, int max_new,
                                      const std::function<bool(const std::vector<int32_t>&)>& stop) {
  const int V = m_.cfg().vocab_size;
  ZAYA_CHECK(!ctx.empty() && ctx.size() + size_t(max_new) <= size_t(max_len_), "generation of ", max_new,
             " tokens after ", ctx.size(), " exceeds ", max_len_);
  InferDecoder& d = decoder(1);
  const float* z = prefill(d, ctx);
  std::vector<int32_t> gen;
  for (int i = 0; i < max_new; ++i) {
    const int32_t t = int32_t(std::max_element(z, z + V) - z);
    gen.push_back(t);
    stats_.generated_tokens++;
    if (stop(gen) || i + 1 == max_new) break;
    z = d.feed(&t, 1);
  }
  return gen;
}

LoadedModel open_model(const std::string& hf_dir, const std::string& ckpt, bool fp32) {
  if (hf_dir.empty() == ckpt.empty()) fail("give exactly one of --model DIR (HF format) or --ckpt DIR (zaya)");
  LoadedModel L;
  L.name = hf_dir.empty() ? ckpt : hf_dir;
  if (!ckpt.empty()) {
    Checkpoint ck(ckpt);
    L.cfg = checkpoint_model_config(ck);
    L.fp32 = std::make_unique<Model<float>>(L.cfg);
    load_checkpoint_model(ck, *L.fp32);
    L.tokenizer = checkpoint_tokenizer(ck);
  } else {
    L.cfg = load_model_config(hf_dir);
    L.tokenizer = find_model_tokenizer(hf_dir);
    if (!fp32 && hf_weights_are_bf16(hf_dir)) {  // memory-mapped, used in place
      L.im = std::make_unique<InferModel>(L.cfg, open_hf_weights(hf_dir));
      return L;
    }
    L.fp32 = std::make_unique<Model<float>>(L.cfg);
    load_hf_weights(hf_dir, *L.fp32);
  }
  L.im = std::make_unique<InferModel>(L.cfg, WeightStore::from_model(*L.fp32));
  return L;
}

}  // namespace zaya::eval
