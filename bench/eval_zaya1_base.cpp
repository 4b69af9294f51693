// zaya eval's speed on the full ZAYA1-base shape with random bf16 weights used in place
// (written by write_random_hf_bf16, as bench_zaya1_base does): 4-choice items with ~200-token
// contexts, in requests (scored choices) per second, against the prefill rate of the same
// model, four ways: the engine across items (--batch rows of several items per feed), one
// item at a time (its choices as rows), one choice at a time, and the context again for every
// choice (no sharing). --pairs N instead runs the first two alternately N times (on a loaded
// machine the load drifts between runs; each pair's ratio is what to read).
//   bench_eval_zaya1_base [--dir D] [--keep|--reuse] [--config TOML] [--items N] [--batch B]
//                         [--context N] [--choices N] [--cont N] [--threads N] [--pairs N]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "ckpt/hf_mmap.h"
#include "core/error.h"
#include "core/timer.h"
#include "eval/engine.h"
#include "kernels/linear_bf16.h"
#include "model/config.h"
#include "model/infer.h"

namespace fs = std::filesystem;
using namespace zaya;

namespace {

struct Args {
  std::string dir = "/tmp/zaya1_base_eval_bench", config = ZAYA_SOURCE_DIR "/configs/zaya1-base.toml";
  bool keep = false, reuse = false;
  int items = 4, batch = 16, context = 200, choices = 4, cont = 12, threads = 0, pairs = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) fail(k, " needs a value");
      return argv[++i];
    };
    if (k == "--dir") a.dir = val();
    else if (k == "--config") a.config = val();
    else if (k == "--keep") a.keep = true;
    else if (k == "--reuse") a.reuse = a.keep = true;
    else if (k == "--items") a.items = std::atoi(val().c_str());
    else if (k == "--batch") a.batch = std::atoi(val().c_str());
    else if (k == "--pairs") a.pairs = std::atoi(val().c_str());
    else if (k == "--context") a.context = std::atoi(val().c_str());
    else if (k == "--choices") a.choices = std::atoi(val().c_str());
    else if (k == "--cont") a.cont = std::atoi(val().c_str());
    else if (k == "--threads") a.threads = std::atoi(val().c_str());
    else fail("unknown option ", k, " (see the comment at the top of bench/eval_zaya1_base.cpp)");
  }
  ZAYA_CHECK(a.items > 0 && a.batch > 0 && a.context > 1 && a.choices > 1 && a.cont > 1,
             "--items, --batch, --context, --choices, --cont: positive");
  return a;
}

struct Item {
  std::vector<int32_t> ctx;
  std::vector<std::vector<int32_t>> conts;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it comes (a run takes minutes)
    if (a.threads > 0) omp_set_num_threads(a.threads);
    const ModelConfig cfg = load_model_config(a.config);
    std::printf("model %s, %d threads, bf16 kernel %s\n", cfg.name.c_str(), omp_get_max_threads(), linear_bf16_kernel());
    if (!(a.reuse && fs::exists(fs::path(a.dir) / "config.json"))) {
      Timer tw;
      const uint64_t bytes = write_random_hf_bf16(a.dir, cfg, 1, size_t(1) << 30);
      std::printf("wrote %s: %.2f GB in %.1f s\n", a.dir.c_str(), bytes / 1e9, tw.seconds());
    }
    Timer tl;
    InferModel model(cfg, open_hf_weights(a.dir));
    std::printf("load: %.2f s (%.2f GB mapped)\n", tl.seconds(), model.stored_bytes() / 1e9);
    // Items: a context of --context tokens, --choices continuations of --cont +- 4 tokens.
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> tok(3, std::min(cfg.vocab_size, 200000) - 1);
    std::uniform_int_distribution<int> len(a.cont - std::min(4, a.cont - 2), a.cont + 4);
    std::vector<Item> items(size_t(a.items) + 1);  // the first one warms up
    int max_len = 0, cont_tokens = 0;
    for (Item& it : items) {
      for (int t = 0; t < a.context; ++t) it.ctx.push_back(tok(rng));
      for (int c = 0; c < a.choices; ++c) {
        it.conts.emplace_back(size_t(len(rng)));
        for (int32_t& t : it.conts.back()) t = tok(rng);
        max_len = std::max(max_len, a.context + int(it.conts.back().size()));
        if (&it != &items[0]) cont_tokens += int(it.conts.back().size());
      }
    }
    const int requests = a.items * a.choices;
    // Prefill rate: the context alone through the decoder (the engine's context path).
    {
      InferDecoder d(model, 1, a.context);
      d.feed(items[0].ctx.data(), a.context);  // warm-up: pages, oneDNN primitives
    }
    auto prefill_rate = [&] {
      double s = 0;
      for (int i = 1; i <= a.items; ++i) {
        InferDecoder d(model, 1, a.context);
        Timer t;
        d.feed(items[size_t(i)].ctx.data(), a.context);
        s += t.seconds();
      }
      return double(a.items) * a.context / s;
    };
    const double prefill_before = prefill_rate();
    std::printf("prefill: %.1f tokens/s (%d-token contexts, batch 1)\n", prefill_before, a.context);
    // mode: 0 all items in one score_many call (rows across items), 1 one item per call,
    // 2 one choice per call after its context (the context again for every choice).
    double rows_s = 0;  // the last run's seconds in continuation rows
    auto run = [&](const char* name, int batch, int mode) {
      eval::Engine e(model, batch, max_len);
      auto score_item = [&](const Item& it) {
        if (mode != 2) return (void)e.score(it.ctx, it.conts);
        for (const auto& c : it.conts) e.score(it.ctx, {c});
      };
      score_item(items[0]);  // warm-up
      const eval::EngineStats s0 = e.stats();
      Timer t;
      if (mode == 0) {
        std::vector<eval::ScoreRequest> reqs;
        for (int i = 1; i <= a.items; ++i) reqs.push_back({&items[size_t(i)].ctx, &items[size_t(i)].conts});
        e.score_many(reqs);
      } else {
        for (int i = 1; i <= a.items; ++i) score_item(items[size_t(i)]);
      }
      const double s = t.seconds(), rps = requests / s;
      const eval::EngineStats& s1 = e.stats();
      const uint64_t fed = s1.context_tokens - s0.context_tokens, waves = s1.waves - s0.waves;
      std::printf("%-48s %7.3f requests/s  %7.1f tokens/s fed  (%llu context tokens, %llu row feeds of %.1f rows: "
                  "prefill %.1f s, rows %.1f s)\n",
                  name, rps, double(fed + uint64_t(cont_tokens)) / s, (unsigned long long)fed, (unsigned long long)waves,
                  double(requests) / double(std::max<uint64_t>(waves, 1)), s1.prefill_s - s0.prefill_s,
                  s1.rows_s - s0.rows_s);
      rows_s = s1.rows_s - s0.rows_s;
      return rps;
    };
    char across_name[96];
    std::snprintf(across_name, sizeof across_name, "batch %d, rows across items", a.batch);
    char item_name[96];
    std::snprintf(item_name, sizeof item_name, "batch %d, one item at a time (its choices)", a.choices);
    for (int p = 1; p <= a.pairs; ++p) {
      const double x = run(across_name, a.batch, 0), xr = rows_s, y = run(item_name, a.choices, 1);
      std::printf("pair %d: across items / one item at a time = %.2fx requests/s, %.2fx less time in rows\n", p,
                  x / y, rows_s / xr);
    }
    if (a.pairs == 0) {
      const double across = run(across_name, a.batch, 0);
      const double shared4 = run(item_name, a.choices, 1);
      const double shared1 = run("batch 1, context once per item", 1, 1);
      const double apart = run("batch 1, context once per choice (no sharing)", 1, 2);
      const double prefill_after = prefill_rate();
      const double prefill_tps = 0.5 * (prefill_before + prefill_after);
      std::printf("prefill after: %.1f tokens/s; their mean %.1f tokens/s\n", prefill_after, prefill_tps);
      // What the prefill rate alone allows: every request a context + continuation prefill,
      // or one context per item plus the continuations.
      const double per_item_tokens = a.context + double(cont_tokens) / a.items;
      std::printf("prefill-rate bound, no sharing:   %7.3f requests/s\n",
                  prefill_tps / (a.context + double(cont_tokens) / requests));
      std::printf("prefill-rate bound, shared:       %7.3f requests/s\n", prefill_tps * a.choices / per_item_tokens);
      std::printf("sharing ratio (once per item / once per choice): %.2fx at batch 1, %.2fx at batch %d, %.2fx at batch %d across items\n",
                  shared1 / apart, shared4 / apart, a.choices, across / apart, a.batch);
      std::printf("batching across items: %.2fx batch %d one item at a time, %.2fx batch 1\n", across / shared4,
                  a.choices, across / shared1);
    }
    if (!a.keep) {
      fs::remove_all(a.dir);
      std::printf("removed %s\n", a.dir.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_eval_zaya1_base: error: %s\n", e.what());
    return 1;
  }
}
