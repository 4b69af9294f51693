// zaya eval: lm-eval's metrics against hand computations, the built-in loaders' prompts,
// rolling windows, task-file errors, and the engine's shared-context scoring.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <omp.h>

#include "ckpt/hf.h"
#include "ckpt/hf_mmap.h"
#include "eval/engine.h"
#include "eval/metrics.h"
#include "eval/runner.h"
#include "eval/task.h"
#include "model/config.h"
#include "model/params.h"
#include "quant/convert/quantize_model.h"
#include "check_util.h"
#include "test_util.h"

using namespace zaya;
using namespace zaya::eval;

namespace {
const std::string kData = ZAYA_SOURCE_DIR "/tests/data/eval";

void write(const std::string& path, const std::string& s) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << s;
}
}  // namespace

TEST(EvalMetrics, StderrIsLmEvalSampleStderr) {
  // x = 1,0,1,1: mean 0.75, squared deviations 3 x 0.0625 + 0.5625 = 0.75, sample variance
  // 0.75 / 3 = 0.25, stddev 0.5, stderr 0.5 / sqrt(4) = 0.25.
  EXPECT_DOUBLE_EQ(mean({1, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(mean_stderr({1, 0, 1, 1}), 0.25);
  // 3 of 10 right: sqrt(0.3 * 0.7 * 10 / 9) / sqrt(10) = sqrt(0.21 / 9).
  std::vector<double> x(10, 0.0);
  x[0] = x[4] = x[7] = 1;
  EXPECT_NEAR(mean_stderr(x), std::sqrt(0.21 / 9), 1e-15);
  EXPECT_TRUE(std::isnan(mean_stderr({1})));
  // Pooled (MMLU group): sizes 4 and 10, stderrs 0.25 and sqrt(0.21/9):
  // ((3 * 0.0625 * 4) + (9 * 0.21/9 * 10)) / (14 - 2) / 14 = (0.75 + 2.1) / 12 / 14.
  EXPECT_NEAR(pooled_stderr({0.25, std::sqrt(0.21 / 9)}, {4, 10}), std::sqrt(2.85 / 12 / 14), 1e-15);
}

TEST(EvalMetrics, AccNormDividesByCharacters) {
  // Sums -10 and -12: acc picks choice 0; per character -10/2 = -5 against -12/8 = -1.5:
  // acc_norm picks choice 1.
  ChoiceScores s = score_choices({-10, -12}, {"ab", "abcdefgh"}, 1);
  EXPECT_EQ(s.pred, 0);
  EXPECT_EQ(s.pred_norm, 1);
  EXPECT_EQ(s.acc, 0.0);
  EXPECT_EQ(s.acc_norm, 1.0);
  // Characters, as lm-eval's len(str): "\xc3\xa9\xc3\xa9" is 2 characters, 4 bytes: per
  // character -6/2 = -3 loses to -5/3 = -1.67; per byte (acc_bytes) -6/4 = -1.5 wins.
  s = score_choices({-6, -5}, {"\xc3\xa9\xc3\xa9", "abc"}, 0);
  EXPECT_EQ(s.pred, 1);
  EXPECT_EQ(s.pred_norm, 1);
  EXPECT_EQ(s.acc_norm, 0.0);
  EXPECT_EQ(s.pred_bytes, 0);
  EXPECT_EQ(s.acc_bytes, 1.0);
  EXPECT_EQ(count_chars("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), 4u);  // a, e-acute, euro, an emoji
  // Ties go to the first (numpy argmax).
  EXPECT_EQ(score_choices({-1, -1}, {"a", "b"}, 0).pred, 0);
}

TEST(EvalMetrics, PerplexitiesAndExactMatch) {
  EXPECT_NEAR(perplexity({-1, -3}), std::exp(2.0), 1e-12);
  EXPECT_NEAR(weighted_perplexity({-4, -6}, {2, 3}), std::exp(2.0), 1e-12);
  EXPECT_NEAR(bits_per_byte({-4, -6}, {5, 5}), 1.0 / std::log(2.0), 1e-12);
  EXPECT_EQ(count_words("a b"), 2);
  EXPECT_EQ(count_words(" a  b\n"), 4);  // re.split(r"\s+", " a  b\n") = ['', 'a', 'b', '']
  MatchOptions o;
  EXPECT_EQ(exact_match("Paris.", "paris", o), 0.0);
  o.ignore_case = o.ignore_punctuation = true;
  EXPECT_EQ(exact_match("Paris.", "paris", o), 1.0);
  EXPECT_EQ(apply_filters({{Filter::Regex, "answer is (\\d+)", 0}}, "so the answer is 42. the answer is 7"), "42");
  EXPECT_EQ(apply_filters({{Filter::Regex, "answer is (\\d+)", -1}}, "so the answer is 42. the answer is 7"), "7");
  EXPECT_EQ(apply_filters({{Filter::Regex, "answer is (\\d+)", 0}}, "no idea"), "[invalid]");
  EXPECT_EQ(apply_filters({{Filter::FirstLine, "", 0}}, "4\nand more"), "4");
}

TEST(EvalTasks, HellaswagPreprocess) {
  std::vector<Item> it = build_items(load_builtin_task("hellaswag", kData)[0], 0, 1);
  ASSERT_EQ(it.size(), 12u);
  // activity_label + ": " + ctx_a + " " + ctx_b.capitalize()
  EXPECT_EQ(it[0].contexts[0],
            "Removing ice from car: Then, the man writes over the snow covering the window of a car, and a woman "
            "wearing winter clothes smiles. Then");
  EXPECT_EQ(it[0].continuations[3], " the man continues removing the snow on his car.");
  EXPECT_EQ(it[0].gold, 3);  // "3"
  EXPECT_EQ(it[1].gold, 0);  // 0 as an int
  // " [title]" -> ". ", other [..] dropped, "  " -> " ".
  EXPECT_EQ(it[1].choices[2], "paints the ceiling of the kitchen. blue.");
  EXPECT_EQ(it[6].choices[2], "uses it to paint the wall red.");
  EXPECT_EQ(it[2].choices[3], "sleeps on the guitar for an hour.");
}

TEST(EvalTasks, ArcPiqaLambada) {
  std::vector<Item> a = build_items(load_builtin_task("arc_challenge", kData)[0], 0, 1);
  EXPECT_EQ(a[0].contexts[0], "Question: Which of these is a source of light?\nAnswer:");
  EXPECT_EQ(a[0].continuations[1], " the Sun");
  EXPECT_EQ(a[3].gold, 3);  // labels "1".."4", answerKey "4"
  std::vector<Item> p = build_items(load_builtin_task("piqa", kData)[0], 0, 1);
  EXPECT_EQ(p[1].contexts[0], "Question: How do I keep bread fresh longer?\nAnswer:");
  EXPECT_EQ(p[1].gold, 1);
  std::vector<Item> l = build_items(load_builtin_task("lambada", kData)[0], 0, 1);
  EXPECT_EQ(l[0].contexts[0], "In the beginning God created the heaven and the");
  EXPECT_EQ(l[0].continuations[0], " earth");
}

TEST(EvalTasks, WinograndePartialScoring) {
  std::vector<Item> w = build_items(load_builtin_task("winogrande", kData)[0], 0, 1);
  // The options fill the blank in the contexts; the rest of the sentence is the shared
  // continuation whose log-likelihood is compared.
  ASSERT_EQ(w[0].contexts.size(), 2u);
  EXPECT_EQ(w[0].contexts[0], "The trophy doesn't fit into the brown suitcase because the trophy");
  EXPECT_EQ(w[0].contexts[1], "The trophy doesn't fit into the brown suitcase because the suitcase");
  EXPECT_EQ(w[0].continuations[0], " is too large.");
  EXPECT_EQ(w[0].continuations[1], " is too large.");
  EXPECT_EQ(w[0].gold, 0);
  EXPECT_EQ(w[1].gold, 1);
  // Scores -8 and -5 for the two contexts: acc picks option 2.
  EXPECT_EQ(score_choices({-8, -5}, w[1].choices, w[1].gold).acc, 1.0);
}

TEST(EvalTasks, MmluHeaderAndFiveShotFromDev) {
  std::vector<Task> t = load_builtin_task("mmlu", kData);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "mmlu_astronomy");
  EXPECT_EQ(t[1].name, "mmlu_elementary_mathematics");
  EXPECT_EQ(t[1].num_fewshot, 0);  // lm-eval's default; 5-shot is --num-fewshot 5
  t[1].num_fewshot = 5;
  std::vector<Item> it = build_items(t[1], 0, 1);
  const std::string& c = it[4].contexts[0];
  EXPECT_TRUE(c.starts_with(
            "The following are multiple choice questions (with answers) about elementary mathematics.\n\n"
            "What is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer: B\n\n"))
      << c;
  // The 5 dev questions in order, then the quoted CSV question.
  EXPECT_NE(c.find("Which is even?\nA. 3\nB. 5\nC. 8\nD. 7\nAnswer: C\n\n"
                   "Find the value of x if \"x + 2 = 5\", that is, solve for x.\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer:"),
            std::string::npos);
  EXPECT_TRUE(c.ends_with("\nAnswer:"));
  EXPECT_EQ(it[4].continuations[1], " B");
  EXPECT_EQ(it[4].gold, 1);
}

TEST(EvalTasks, RollingWindowsAsLmEval) {
  std::vector<int32_t> t{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto w = rolling_windows(t, 99, 4);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].first, (std::vector<int32_t>{99}));
  EXPECT_EQ(w[0].second, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(w[1].first, (std::vector<int32_t>{3}));
  EXPECT_EQ(w[1].second, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(w[2].first, (std::vector<int32_t>{5, 6, 7}));  // make_disjoint_window
  EXPECT_EQ(w[2].second, (std::vector<int32_t>{8, 9}));
}

TEST(EvalTasks, BadTaskFilesNameFileAndField) {
  test_util::TempDir d("eval", "bad");
  write(d / "data.jsonl", "{\"q\": \"a\", \"c\": [\"x\", \"y\"], \"g\": 1}\n");
  write(d / "one.jsonl", "{\"q\": \"a\", \"c\": [\"x\"], \"g\": 0}\n");
  write(d / "far.jsonl", "{\"q\": \"a\", \"c\": [\"x\", \"y\"], \"g\": 2}\n");
  write(d / "empty.jsonl", "\n");
  auto task = [&](const std::string& name, const std::string& body) {
    write(d / name, body);
    return test_util::error_of([&] { load_task_file(d / name); });
  };
  const std::string ok = "\"doc_to_text\": \"{{q}}\", \"doc_to_choice\": \"c\", \"doc_to_target\": \"g\"";
  std::string e = task("missing.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"data.jsonl\"}, \"doc_to_text\": \"{{q}}\", \"doc_to_choice\": \"c\"}");
  EXPECT_NE(e.find("missing.json: field 'doc_to_target' is missing"), std::string::npos) << e;
  e = task("metric.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"data.jsonl\"}, " + ok + ", \"metric_list\": [\"f1\"]}");
  EXPECT_NE(e.find("metric.json: field 'metric_list': unknown metric 'f1'"), std::string::npos) << e;
  e = task("empty.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"empty.jsonl\"}, " + ok + "}");
  EXPECT_NE(e.find("empty.jsonl: field 'test_split': split 'test' is empty"), std::string::npos) << e;
  e = task("one.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"one.jsonl\"}, " + ok + "}");
  EXPECT_NE(e.find("one.jsonl:1: field 'doc_to_choice': 1 choice(s)"), std::string::npos) << e;
  e = task("far.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"far.jsonl\"}, " + ok + "}");
  EXPECT_NE(e.find("far.jsonl:1: field 'doc_to_target': gold index 2 is out of range"), std::string::npos) << e;
  e = task("field.json", "{\"task\": \"t\", \"data_files\": {\"test\": \"data.jsonl\"}, \"doc_to_text\": \"{{question}}\", \"doc_to_choice\": \"c\", \"doc_to_target\": \"g\"}");
  EXPECT_NE(e.find("data.jsonl:1: field 'question' is missing"), std::string::npos) << e;
  for (const char* m : {"missing", "metric", "empty", "one", "far", "field"}) {
    const std::string msg = test_util::error_of([&] { load_task_file(d / (std::string(m) + ".json")); });
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
  }
}

// The engine: a context prefilled once and copied into rows scores its continuations as a
// single decoder fed the same pieces does (to the bit), and as one whole sequence does up to
// rounding; batched rows agree up to rounding.
TEST(EvalEngine, SharedContextMatchesSequence) {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  Model<float> model(c);
  model.init(7);
  InferModel im(c, WeightStore::from_model(model));
  const std::vector<int32_t> ctx{1, 5, 9, 13, 2, 7, 30, 4};
  const std::vector<std::vector<int32_t>> conts{{3, 8, 21}, {11}, {6, 6, 6, 6, 6}, {40, 2}, {17, 18}};
  Engine e1(im, 1, 16), e4(im, 4, 16);
  const std::vector<ContinuationScore> a = e1.score(ctx, conts), b = e4.score(ctx, conts);
  for (size_t i = 0; i < conts.size(); ++i) {
    // Reference: one decoder fed the context, then the continuation, no copy.
    InferDecoder d(im, 1, 16);
    const float* z = d.feed(ctx.data(), int(ctx.size()));
    std::vector<double> ref{token_logprob(z, c.vocab_size, conts[i][0], nullptr)};
    if (conts[i].size() > 1)
      d.feed_all_logits(conts[i].data(), int(conts[i].size()) - 1, [&](int r, const float* zz) {
        ref.push_back(token_logprob(zz, c.vocab_size, conts[i][size_t(r) + 1], nullptr));
      });
    ASSERT_EQ(a[i].logprobs.size(), conts[i].size());
    for (size_t t = 0; t < ref.size(); ++t) {
      EXPECT_EQ(a[i].logprobs[t], ref[t]) << i << " " << t;  // the bits
      EXPECT_NEAR(b[i].logprobs[t], ref[t], 1e-4) << i << " " << t;
    }
    // The whole sequence through InferDecoder::logprobs: the same numbers up to rounding.
    std::vector<int32_t> all = ctx;
    all.insert(all.end(), conts[i].begin(), conts[i].end());
    InferDecoder w(im, 1, 16);
    const std::vector<double> lp = w.logprobs(all.data(), int(all.size()));
    for (size_t t = 0; t < conts[i].size(); ++t) EXPECT_NEAR(a[i].logprobs[t], lp[ctx.size() - 1 + t], 1e-4);
  }
  EXPECT_EQ(e4.stats().contexts, 1u);  // the context was scored once for 5 continuations
  EXPECT_EQ(e4.stats().continuations, 5u);
}

// ---------------------------------------------------------------- rows at their own positions

namespace {

ModelConfig rows_cfg() {  // head dim 64, 4 query heads over 2 KV heads, 300 tokens
  return test_util::small_zaya_config("eval-rows-test", 256, 300, 4, 2, 512, 0.05);
}

// The model three ways: fp32 views of a Model<float>, the same weights as a bf16 HF
// directory used in place, and that directory quantized to q8_0.
struct RowsModels {
  test_util::TempDir root{"eval", "rows"};
  ModelConfig cfg = rows_cfg();
  Model<float> fp32{cfg};
  std::unique_ptr<InferModel> f32, bf16, q8;
  RowsModels() {
    randomize_for_checks(fp32.layout, 5, fp32.params.data(), fp32.buffers.data());
    f32 = std::make_unique<InferModel>(cfg, WeightStore::from_model(fp32));
    save_hf_dir(root / "bf16", fp32, DType::BF16, 0, false);
    bf16 = std::make_unique<InferModel>(cfg, open_hf_weights(root / "bf16"));
    QuantizeOptions o;
    o.progress = false;
    quantize_model(root / "bf16", root / "q8_0", o);
    q8 = std::make_unique<InferModel>(cfg, open_hf_weights(root / "q8_0"));
  }
};
RowsModels& rows_models() {
  static RowsModels m;
  return m;
}

int32_t tok(int a, int b) { return int32_t((a * 131 + b * 37 + 11) % 300); }

// Four contexts of different lengths, each prefilled once in a batch-1 decoder and copied
// into its row of a batch-4 decoder whose rows first held a longer context (so a row that
// read cache entries past its own length would see another sequence's); then two feeds of
// n tokens per row. Each row's logits against a batch-1 decoder fed the same pieces:
// the largest |difference| / the largest |logit|.
double rows_vs_single(const InferModel& im, KvCacheDType kv, int n) {
  const int V = im.cfg().vocab_size, cap = 64, B = 4;
  const int lens[B] = {3, 17, 1, 9};
  std::vector<std::vector<int32_t>> ctx(B), cont(B);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < lens[b]; ++t) ctx[size_t(b)].push_back(tok(b, t));
    for (int t = 0; t < 2 * n; ++t) cont[size_t(b)].push_back(tok(b + 7, t));
  }
  InferDecoder rows(im, B, cap, kv), one(im, 1, cap, kv);
  std::vector<int32_t> stale(30);
  for (int t = 0; t < 30; ++t) stale[size_t(t)] = tok(99, t);
  one.feed(stale.data(), 30);
  rows.copy_rows_from(one, 0);
  for (int b : {2, 0, 3, 1}) {  // placement order does not matter
    one.reset();
    one.feed(ctx[size_t(b)].data(), lens[b]);
    rows.copy_row_from(one, 0, b);
  }
  for (int b = 0; b < B; ++b) EXPECT_EQ(rows.pos(b), lens[b]);
  EXPECT_EQ(rows.pos(), 17);
  std::vector<float> got(size_t(B) * 2 * n * V), ref(got.size());
  for (int k = 0; k < 2; ++k) {
    std::vector<int32_t> t(size_t(B) * n);
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < n; ++j) t[size_t(b) * n + j] = cont[size_t(b)][size_t(k * n + j)];
    rows.feed_all_logits(t.data(), n, [&](int r, const float* z) {
      std::copy_n(z, V, &got[((size_t(r / n) * 2 + k) * n + r % n) * V]);
    });
  }
  for (int b = 0; b < B; ++b) {
    EXPECT_EQ(rows.pos(b), lens[b] + 2 * n);
    // Reference: every row of a batch-4 decoder at row b's context (one position for all, the
    // batched path), fed the same tokens: row b's products see as many rows as above.
    InferDecoder d(im, B, cap, kv);
    one.reset();
    one.feed(ctx[size_t(b)].data(), lens[b]);
    d.copy_rows_from(one, 0);
    for (int k = 0; k < 2; ++k) {
      std::vector<int32_t> t(size_t(B) * n);
      for (int bb = 0; bb < B; ++bb)
        for (int j = 0; j < n; ++j) t[size_t(bb) * n + j] = cont[size_t(bb)][size_t(k * n + j)];
      d.feed_all_logits(t.data(), n, [&](int r, const float* z) {
        if (r / n == b) std::copy_n(z, V, &ref[((size_t(b) * 2 + k) * n + r % n) * V]);
      });
    }
  }
  test_util::MaxError e;
  e.add_all(got, ref);
  return e.rel();  // +inf on any NaN or infinity
}

}  // namespace

// Rows at different positions fed together give each row what it gets among rows at one position:
// fp32 and bf16 caches, fp32 / bf16 / q8_0 weights, one token per feed (decode: the team and
// the direct kernels), 6 (the team with more rows) and 12 (48 rows: the blocked kernel row
// by row). The reference has the same rows at one position, so every product sees as many
// rows (the kernels pick their path by row count) and only the positions differ. Measured:
// 0 (bit-identical) for every case; the bound leaves room for an expert's row count that
// crosses a kernel's threshold on another machine.
TEST(InferRows, RowsAtOwnPositionsMatchSingleRows) {
  const int threads = omp_get_max_threads();
  RowsModels& m = rows_models();
  // One thread: the direct kernel (1 per feed) and the blocked one (6, 12). Two: the decode
  // team (up to 32 rows; its barriers are slow on a loaded machine, so bf16 weights only).
  for (int nt : {1, 2}) {
    omp_set_num_threads(nt);
    for (auto [name, im] : {std::pair{"fp32", m.f32.get()}, std::pair{"bf16", m.bf16.get()}, std::pair{"q8_0", m.q8.get()}})
      for (KvCacheDType kv : {KvCacheDType::F32, KvCacheDType::BF16})
        for (int n : {1, 6, 12}) {
          if (nt == 2 && (n == 12 || im != m.bf16.get())) continue;
          const double d = rows_vs_single(*im, kv, n);
          std::printf("%d thread(s), weights %s, kv %s, %d per feed: max |diff| / max |logit| = %.2e\n", nt, name,
                      kv == KvCacheDType::F32 ? "fp32" : "bf16", n, d);
          EXPECT_LT(d, 1e-5) << name << " n=" << n;
        }
  }
  omp_set_num_threads(threads);
}

// The engine across requests: --batch 16 fills its rows with the continuations of several
// requests (contexts of different lengths, 1 to 5 continuations of 1 to 9 tokens, one
// request much longer than the others), against batch 1, with the fp32 cache (fp32 views)
// and the bf16 cache (bf16 weights in place). Results come back in the caller's order (each
// request also scored alone), every context is prefilled once, and rows of several requests
// share each feed.
TEST(EvalEngine, CrossRequestBatchesAgreeWithBatchOne) {
  RowsModels& m = rows_models();
  std::vector<std::vector<int32_t>> ctx;
  std::vector<std::vector<std::vector<int32_t>>> conts;
  size_t rows = 0;
  for (int i = 0; i < 11; ++i) {
    const int L = i == 5 ? 60 : 1 + (i * 7) % 19, nc = 1 + i % 5;
    ctx.emplace_back();
    for (int t = 0; t < L; ++t) ctx.back().push_back(tok(i, t));
    conts.emplace_back();
    for (int c = 0; c < nc; ++c) {
      const int n = i == 5 ? 30 : 1 + (i + 3 * c) % 9;
      conts.back().emplace_back();
      for (int t = 0; t < n; ++t) conts.back().back().push_back(tok(i + 50, c * 10 + t));
      rows += n > 1;
    }
  }
  std::vector<ScoreRequest> reqs;
  for (size_t i = 0; i < ctx.size(); ++i) reqs.push_back({&ctx[i], &conts[i]});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // (the engine's order does not depend on threads; InferRows covers the team)
  for (auto [name, im] : {std::pair{"fp32 weights and cache", m.f32.get()}, std::pair{"bf16 weights and cache", m.bf16.get()}}) {
    Engine e1(*im, 1, 96), e16(*im, 16, 96);
    const auto a = e1.score_many(reqs), b = e16.score_many(reqs);
    ASSERT_EQ(a.size(), reqs.size());
    ASSERT_EQ(b.size(), reqs.size());
    double worst = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      Engine alone(*im, 1, 96);
      const auto s = alone.score(ctx[i], conts[i]);
      ASSERT_EQ(a[i].size(), conts[i].size());
      ASSERT_EQ(b[i].size(), conts[i].size());
      for (size_t c = 0; c < conts[i].size(); ++c) {
        ASSERT_EQ(a[i][c].logprobs.size(), conts[i][c].size());
        ASSERT_EQ(b[i][c].logprobs.size(), conts[i][c].size());
        EXPECT_EQ(a[i][c].logprobs, s[c].logprobs) << name << " request " << i;  // batch 1: the bits
        const double d = std::fabs(b[i][c].sum() - a[i][c].sum()) / std::max(1.0, std::fabs(a[i][c].sum()));
        worst = test_util::max_err(worst, d);
        // fp32: the products' summation order; bf16 weights: 16 rows or more take oneDNN's AMX
        // product (activations rounded to bf16), fewer the own kernel.
        EXPECT_LT(d, im == m.f32.get() ? 1e-6 : 1e-4) << name << " request " << i << " continuation " << c;
        EXPECT_EQ(b[i][c].greedy, a[i][c].greedy) << name << " request " << i;
      }
    }
    std::printf("%s: batch 16 vs batch 1, max relative difference of a loglikelihood %.2e\n", name, worst);
    EXPECT_EQ(e16.stats().contexts, reqs.size());
    EXPECT_EQ(e1.stats().waves, rows);
    EXPECT_EQ(e16.stats().waves, (rows + 15) / 16);  // rows of several requests in each feed
  }
  omp_set_num_threads(threads);
}

// A wave closes when its longest context + longest continuation would pass the decoders'
// length: here a 17-token context with short continuations meets a 3-token context with a
// 16-token continuation (each fits max_len 18 alone, together they would need 33).
TEST(EvalEngine, WaveStopsAtTheDecoderLength) {
  RowsModels& m = rows_models();
  std::vector<int32_t> c1(17, 5), c2(3, 9);
  std::vector<std::vector<int32_t>> x1{{1, 2}, {3, 4}}, x2{std::vector<int32_t>(16, 7)};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Engine e1(*m.f32, 1, 18), e8(*m.f32, 8, 18);
  const auto a = e1.score_many({{&c1, &x1}, {&c2, &x2}}), b = e8.score_many({{&c1, &x1}, {&c2, &x2}});
  EXPECT_EQ(e8.stats().waves, 2u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t c = 0; c < a[i].size(); ++c) EXPECT_NEAR(b[i][c].sum(), a[i][c].sum(), 1e-6 * std::fabs(a[i][c].sum()));
  omp_set_num_threads(threads);
}
