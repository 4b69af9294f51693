#include "eval/engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "ckpt/tokenizer_files.h"
#include "core/error.h"
#include "core/timer.h"

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
  if (!d) {
    // A short last wave gets its own size; keep at most that, batch 1 and batch_ (memory).
    for (auto it = dec_.begin(); it != dec_.end();)
      it = it->first != batch && it->first != 1 && it->first != batch_ ? dec_.erase(it) : std::next(it);
    d = std::make_unique<InferDecoder>(m_, batch, max_len_);
  }
  return *d;
}

const float* Engine::prefill(InferDecoder& d, const std::vector<int32_t>& ctx) {
  const Timer t;
  d.reset();
  const float* last = nullptr;
  for (size_t c0 = 0; c0 < ctx.size(); c0 += kChunk)
    last = d.feed(ctx.data() + c0, int(std::min<size_t>(kChunk, ctx.size() - c0)));
  stats_.context_tokens += ctx.size();
  stats_.contexts++;
  stats_.prefill_s += t.seconds();
  return last;
}

std::vector<ContinuationScore> Engine::score(const std::vector<int32_t>& ctx,
                                             const std::vector<std::vector<int32_t>>& conts) {
  return std::move(score_many({ScoreRequest{&ctx, &conts}})[0]);
}

std::vector<std::vector<ContinuationScore>> Engine::score_many(const std::vector<ScoreRequest>& reqs,
                                                               const std::function<void(size_t)>& progress) {
  const int V = m_.cfg().vocab_size;
  auto longest = [&](size_t i) {
    size_t m = 0;
    for (const auto& c : *reqs[i].conts) m = std::max(m, c.size());
    return m;
  };
  for (const ScoreRequest& r : reqs) {
    ZAYA_CHECK(r.ctx && r.conts && !r.ctx->empty(), "scoring needs at least one context token");
    for (const auto& c : *r.conts) {
      ZAYA_CHECK(!c.empty(), "an empty continuation");
      ZAYA_CHECK(r.ctx->size() + c.size() - 1 <= size_t(max_len_), "context + continuation of ",
                 r.ctx->size() + c.size(), " tokens exceed ", max_len_);
    }
  }
  std::vector<std::vector<ContinuationScore>> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) out[i].resize(reqs[i].conts->size());
  // Longest first (lm-eval's order): memory problems show at once, and similar lengths meet.
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reqs[a].ctx->size() + longest(a) > reqs[b].ctx->size() + longest(b);
  });
  // Rows: every continuation of more than one token (the first token of each is predicted by
  // the context's last position), in that order; pending[k]: rows of order[k] still to run.
  struct Row {
    size_t k, cont;
  };
  std::vector<Row> rows;
  std::vector<size_t> pending(reqs.size(), 0);
  for (size_t k = 0; k < order.size(); ++k)
    for (size_t c = 0; c < reqs[order[k]].conts->size(); ++c)
      if ((*reqs[order[k]].conts)[c].size() > 1) {
        rows.push_back({k, c});
        pending[k]++;
      }
  if (!ctx_dec_) ctx_dec_ = std::make_unique<InferDecoder>(m_, 1, max_len_);
  size_t prefilled = 0, done = 0, told = size_t(-1);  // order[0, prefilled) have had their context run
  auto report = [&] {
    if (progress && done != told) progress(told = done);
  };
  auto prefill_to = [&](size_t k_end) {
    for (; prefilled < k_end; ++prefilled) {
      const size_t i = order[prefilled];
      const float* last = prefill(*ctx_dec_, *reqs[i].ctx);
      for (size_t c = 0; c < reqs[i].conts->size(); ++c) {
        bool g = false;
        out[i][c].logprobs.push_back(token_logprob(last, V, (*reqs[i].conts)[c][0], &g));
        out[i][c].greedy = g;
      }
      if (pending[prefilled] == 0) done++;
    }
  };
  for (size_t r0 = 0; r0 < rows.size();) {
    // A wave: up to batch_ rows whose longest context + longest fed continuation fits.
    size_t r1 = r0, max_ctx = 0, m = 0;
    while (r1 < rows.size() && r1 - r0 < size_t(batch_)) {
      const ScoreRequest& q = reqs[order[rows[r1].k]];
      const size_t c = std::max(max_ctx, q.ctx->size()), w = std::max(m, (*q.conts)[rows[r1].cont].size() - 1);
      if (r1 > r0 && c + w > size_t(max_len_)) break;
      max_ctx = c;
      m = w;
      ++r1;
    }
    const int R = int(r1 - r0);
    InferDecoder& d = decoder(R);
    for (int b = 0; b < R; ++b) {
      const size_t k = rows[r0 + size_t(b)].k;
      if (k >= prefilled) prefill_to(k + 1);  // the context sits in ctx_dec_ until its rows are placed
      d.copy_row_from(*ctx_dec_, 0, b);
    }
    const Timer tr;
    const size_t chunk = size_t(std::min(kChunk, std::max(1, kFeedRows / R)));
    for (size_t c0 = 0; c0 < m; c0 += chunk) {
      const int w = int(std::min(chunk, m - c0));
      std::vector<int32_t> tok(size_t(R) * w);
      for (int b = 0; b < R; ++b) {
        const auto& c = (*reqs[order[rows[r0 + size_t(b)].k]].conts)[rows[r0 + size_t(b)].cont];
        for (int j = 0; j < w; ++j)  // rows past their end repeat the last token (ignored)
          tok[size_t(b) * w + j] = c[std::min(c0 + j, c.size() - 1)];
      }
      // Position j of row b predicts token c0 + j + 1 of its continuation; past the end: padding.
      auto target = [&](int r) -> const std::vector<int32_t>& {
        const Row& row = rows[r0 + size_t(r / w)];
        return (*reqs[order[row.k]].conts)[row.cont];
      };
      d.feed_all_logits(
          tok.data(), w,
          [&](int r, const float* z) {
            const Row& row = rows[r0 + size_t(r / w)];
            ContinuationScore& s = out[order[row.k]][row.cont];
            bool g = false;
            s.logprobs.push_back(token_logprob(z, V, target(r)[c0 + size_t(r % w) + 1], &g));
            s.greedy = s.greedy && g;
          },
          [&](int r) { return c0 + size_t(r % w) + 1 < target(r).size(); });
      stats_.row_tokens += uint64_t(R) * w;
    }
    stats_.waves++;
    stats_.rows_s += tr.seconds();
    for (size_t r = r0; r < r1; ++r)
      if (--pending[rows[r].k] == 0) done++;
    r0 = r1;
    report();
  }
  prefill_to(order.size());
  report();
  for (const ScoreRequest& r : reqs) {
    for (const auto& c : *r.conts) stats_.continuation_tokens += c.size();
    stats_.continuations += r.conts->size();
  }
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
