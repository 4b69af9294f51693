// Python's random.Random port (eval/py_random.h) and the few-shot draw built on it, against
// values printed once by /usr/bin/python3 (CPython 3.11); tests/eval_fewshot.sh checks more
// live against Python.
#include <gtest/gtest.h>

#include "eval/py_random.h"
#include "eval/task.h"

using namespace zaya::eval;

TEST(PyRandom, GetrandbitsAsCPython) {
  // random.Random(1234): getrandbits(32) x 3, getrandbits(64), getrandbits(7), getrandbits(40)
  PyRandom r(1234);
  EXPECT_EQ(r.getrandbits(32), 4150886329u);
  EXPECT_EQ(r.getrandbits(32), 3342196574u);
  EXPECT_EQ(r.getrandbits(32), 1892932127u);
  EXPECT_EQ(r.getrandbits(64), 138193304849869414ull);
  EXPECT_EQ(r.getrandbits(7), 11u);
  EXPECT_EQ(r.getrandbits(40), 1038999730288ull);
  PyRandom zero(0);  // a key of one word, 0
  EXPECT_EQ(zero.getrandbits(32), 3626764237u);
  EXPECT_EQ(zero.getrandbits(32), 1654615998u);
  PyRandom wide((1ull << 40) + 5);  // a key of two words
  EXPECT_EQ(wide.getrandbits(32), 2166296868u);
  EXPECT_EQ(wide.getrandbits(32), 2220160828u);
}

TEST(PyRandom, RandbelowAndSampleAsCPython) {
  PyRandom b(1234);  // [r._randbelow(10) for _ in range(8)]
  std::vector<uint64_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(b.randbelow(10));
  EXPECT_EQ(got, (std::vector<uint64_t>{7, 1, 0, 1, 9, 0, 1, 1}));
  // One generator, in turn: sample(range(50), 6) and sample(range(7), 7) take the pool path
  // (n <= setsize), sample(range(100), 6), sample(range(30), 5) and sample(range(1000), 26)
  // the set path.
  PyRandom r(1234);
  EXPECT_EQ(r.sample(50, 6), (std::vector<size_t>{49, 28, 7, 0, 5, 37}));
  EXPECT_EQ(r.sample(100, 6), (std::vector<size_t>{4, 85, 88, 10, 12, 98}));
  EXPECT_EQ(r.sample(30, 5), (std::vector<size_t>{11, 7, 0, 25, 20}));
  EXPECT_EQ(r.sample(7, 7), (std::vector<size_t>{4, 3, 6, 5, 0, 2, 1}));
  EXPECT_EQ(r.sample(1000, 26),
            (std::vector<size_t>{730, 117, 865, 14,  515, 498, 901, 988, 255, 66,  683, 554, 934,
                                 477, 70,  615, 691, 91,  527, 592, 47,  276, 844, 569, 64,  660}));
  EXPECT_THROW(r.sample(3, 4), std::exception);
}

namespace {

// 30 training documents t0..t29 and 4 evaluation documents; evaluation document 1 equals
// training document 25 (by value, as lm-eval compares them).
Task toy_task(bool draw_extra) {
  Task t;
  t.name = "toy";
  t.source = "toy";
  t.test_split = "validation";
  t.fewshot_split = "train";
  t.fewshot_draw_extra = draw_extra;
  t.num_fewshot = 3;
  t.metrics = {"acc"};
  for (int i = 0; i < 30; ++i)
    t.splits["train"].push_back({{{"q", "t" + std::to_string(i)}, {"g", i % 2}}, "train:" + std::to_string(i + 1)});
  for (int i = 0; i < 4; ++i)
    t.splits["validation"].push_back({{{"q", "v" + std::to_string(i)}, {"g", 0}}, "validation:" + std::to_string(i + 1)});
  t.splits["validation"][1].j = t.splits["train"][25].j;
  t.doc_to_text = [](const Doc& d) { return "Q: " + doc_string(d, "q"); };
  t.doc_to_choice = [](const Doc&) { return std::vector<std::string>{"no", "yes"}; };
  t.doc_to_gold = [](const Doc& d) { return doc_field(d, "g").get<int>(); };
  return t;
}

}  // namespace

TEST(PyRandom, FewshotDrawAsLmEvalSampler) {
  // r = random.Random(1234); [r.sample(range(30), 4) for _ in range(4)] =
  // [[24, 14, 3, 0], [2, 29, 25, 18], [1, 21, 22, 2], [3, 24, 11, 7]]: k + 1 drawn, the
  // document itself (train 25, in document 1's draw) dropped, the first k kept.
  std::vector<Item> it = build_items(toy_task(true), 0, 1234);
  ASSERT_EQ(it.size(), 4u);
  EXPECT_EQ(it[0].fewshot_ids, (std::vector<int>{24, 14, 3}));
  EXPECT_EQ(it[1].fewshot_ids, (std::vector<int>{2, 29, 18}));
  EXPECT_EQ(it[2].fewshot_ids, (std::vector<int>{1, 21, 22}));
  EXPECT_EQ(it[3].fewshot_ids, (std::vector<int>{3, 24, 11}));
  EXPECT_EQ(it[0].contexts[0], "Q: t24 no\n\nQ: t14 no\n\nQ: t3 yes\n\nQ: v0");
  // k drawn (ARC's case): [r.sample(range(30), 3) for _ in range(4)]
  it = build_items(toy_task(false), 0, 1234);
  EXPECT_EQ(it[0].fewshot_ids, (std::vector<int>{24, 14, 3}));
  EXPECT_EQ(it[1].fewshot_ids, (std::vector<int>{0, 2, 29}));
  EXPECT_EQ(it[2].fewshot_ids, (std::vector<int>{25, 18, 1}));
  EXPECT_EQ(it[3].fewshot_ids, (std::vector<int>{21, 22, 2}));
  // --limit scores the first documents with the same draws; 0 shots draw nothing.
  it = build_items(toy_task(false), 2, 1234);
  ASSERT_EQ(it.size(), 2u);
  EXPECT_EQ(it[1].fewshot_ids, (std::vector<int>{0, 2, 29}));
  Task z = toy_task(true);
  z.num_fewshot = 0;
  it = build_items(z, 0, 1234);
  EXPECT_TRUE(it[0].fewshot_ids.empty());
  EXPECT_EQ(it[0].contexts[0], "Q: v0");
  // More shots than the split holds: one line naming the task and the field.
  z.num_fewshot = 30;
  try {
    build_items(z, 0, 1234);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("field 'num_fewshot': 30 shots draw 31 documents but split 'train' has 30"),
              std::string::npos)
        << e.what();
  }
}
