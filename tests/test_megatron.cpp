// Megatron-LM indexed datasets (data/megatron.h): the writer's bytes, the reader's checks,
// and the loader over a Megatron source against the same tokens in zaya shards.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/megatron.h"
#include "data/shard.h"
#include "test_util.h"

using namespace zaya;
using test_util::error_of;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("megatron", tag) {}
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::string& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(b.data(), std::streamsize(b.size()));
}
template <class T>
T get(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void put(std::string& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

// Documents of varied lengths, each ending with EOS = 1, tokens < vocab.
std::vector<std::vector<uint32_t>> make_docs(int n, uint32_t vocab, uint32_t seed) {
  std::vector<std::vector<uint32_t>> docs;
  uint32_t x = seed;
  for (int d = 0; d < n; ++d) {
    std::vector<uint32_t> t;
    const int len = 3 + d % 17;
    for (int i = 0; i < len; ++i) {
      x = x * 1664525u + 1013904223u;
      t.push_back(2 + (x >> 8) % (vocab - 2));
    }
    t.push_back(1);
    docs.push_back(std::move(t));
  }
  return docs;
}

std::vector<uint32_t> concat(const std::vector<std::vector<uint32_t>>& docs) {
  std::vector<uint32_t> all;
  for (const auto& d : docs) all.insert(all.end(), d.begin(), d.end());
  return all;
}

}  // namespace

TEST(Megatron, DtypeFollowsMegatronsChoice) {
  EXPECT_EQ(megatron_dtype_for_vocab(65499), kMegatronUint16);
  EXPECT_EQ(megatron_dtype_for_vocab(65500), kMegatronInt32);
  EXPECT_EQ(megatron_dtype_for_vocab(262144), kMegatronInt32);
  TempDir dir("dtype");
  for (uint32_t vocab : {65499u, 65500u}) {
    const std::string prefix = dir / ("v" + std::to_string(vocab));
    write_megatron(prefix, {{vocab - 1, 1}, {7, 1}}, vocab);
    const std::string idx = read_bytes(prefix + ".idx");
    ASSERT_GE(idx.size(), 18u);
    EXPECT_EQ(uint8_t(idx[17]), vocab == 65499u ? 8 : 4);
    EXPECT_EQ(fs::file_size(prefix + ".bin"), 4u * (vocab == 65499u ? 2 : 4));
    MegatronDataset ds(prefix);
    std::vector<int32_t> out(4);
    ds.read(0, 4, out.data(), vocab);
    EXPECT_EQ(out, (std::vector<int32_t>{int32_t(vocab - 1), 1, 7, 1}));
  }
}

TEST(Megatron, RoundTripBytesAndReader) {
  TempDir dir("roundtrip");
  const auto docs = make_docs(40, 300, 5);
  const std::string prefix = dir / "train_text_document";
  MegatronWriter w(prefix, 300);
  for (const auto& d : docs) w.add_document(d);
  EXPECT_EQ(w.documents(), 40u);
  EXPECT_EQ(w.tokens(), concat(docs).size());
  w.finish();

  // The index, byte by byte, as the format defines it.
  const std::string idx = read_bytes(prefix + ".idx");
  const uint64_t S = docs.size();
  ASSERT_EQ(idx.size(), 34 + 12 * S + 8 * (S + 1));
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(get<uint64_t>(idx, 9), 1u);
  EXPECT_EQ(uint8_t(idx[17]), 8);
  EXPECT_EQ(get<uint64_t>(idx, 18), S);
  EXPECT_EQ(get<uint64_t>(idx, 26), S + 1);
  int64_t ptr = 0;
  for (uint64_t i = 0; i < S; ++i) {
    EXPECT_EQ(get<int32_t>(idx, 34 + 4 * i), int32_t(docs[i].size()));
    EXPECT_EQ(get<int64_t>(idx, 34 + 4 * S + 8 * i), ptr);
    ptr += int64_t(2 * docs[i].size());
  }
  for (uint64_t d = 0; d <= S; ++d) EXPECT_EQ(get<int64_t>(idx, 34 + 12 * S + 8 * d), int64_t(d));
  const std::string bin = read_bytes(prefix + ".bin");
  const auto all = concat(docs);
  ASSERT_EQ(bin.size(), 2 * all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(get<uint16_t>(bin, 2 * i), all[i]);

  MegatronDataset ds(prefix);
  EXPECT_EQ(ds.sequences(), S);
  EXPECT_EQ(ds.documents(), S);
  EXPECT_EQ(ds.tokens(), all.size());
  EXPECT_EQ(ds.sequence_length(3), docs[3].size());
  std::vector<int32_t> out(all.size());
  ds.read(0, all.size(), out.data(), 300);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(out[i], int32_t(all[i]));
  uint64_t pos = ds.sequence_start(7);
  EXPECT_EQ(ds.sequence_at(pos), 7u);
  EXPECT_EQ(ds.sequence_at(pos + docs[7].size() - 1), 7u);
  EXPECT_NE(error_of([&] { ds.read(all.size() - 2, 3, out.data()); }).find("passes the end"), std::string::npos);
  // Tokens above a smaller vocabulary are refused on read, naming the file and position.
  std::string e = error_of([&] { ds.check_tokens(50); });
  EXPECT_NE(e.find(prefix + ".bin: token "), std::string::npos) << e;
  EXPECT_NE(e.find("out of the vocabulary (size 50)"), std::string::npos) << e;
  // Out-of-vocabulary tokens are refused by the writer.
  MegatronWriter bad(dir / "bad", 10);
  e = error_of([&] { bad.add_document(std::vector<uint32_t>{3, 10}); });
  EXPECT_NE(e.find("token 10"), std::string::npos) << e;
}

TEST(Megatron, UnfinishedWriterLeavesNothing) {
  TempDir dir("unfinished");
  {
    MegatronWriter w(dir / "x", 300);
    w.add_document(std::vector<uint32_t>{5, 6, 1});
  }
  EXPECT_TRUE(fs::is_empty(dir.path)) << "an unfinished writer left files";
  // A finished dataset survives an unfinished rewrite untouched.
  write_megatron(dir / "x", {{5, 6, 1}}, 300);
  const std::string before = read_bytes(dir / "x.idx") + read_bytes(dir / "x.bin");
  {
    MegatronWriter w(dir / "x", 300);
    w.add_document(std::vector<uint32_t>{9, 9, 9, 1});
  }
  EXPECT_EQ(read_bytes(dir / "x.idx") + read_bytes(dir / "x.bin"), before);
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir.path)) n += e.path().filename().string()[0] == '.';
  EXPECT_EQ(n, 0u) << "hidden temporaries left behind";
}

TEST(Megatron, CorruptDatasetsGiveOneLineErrorsNamingTheFile) {
  TempDir dir("corrupt");
  const std::string good = dir / "good";
  write_megatron(good, {{5, 6, 1}, {7, 8, 9, 1}, {4, 1}}, 300);  // 9 tokens, 18 bytes
  const std::string idx = read_bytes(good + ".idx"), bin = read_bytes(good + ".bin");
  const size_t S = 3, ptrs = 34 + 4 * S, docs = ptrs + 8 * S;
  auto variant = [&](const std::string& name, const std::string& i, const std::string& b) {
    write_bytes(dir / (name + ".idx"), i);
    write_bytes(dir / (name + ".bin"), b);
    std::string e = error_of([&] { MegatronDataset ds(dir / name); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find(dir / name), std::string::npos) << e;
    return e;
  };
  auto has = [](const std::string& e, const std::string& what) {
    EXPECT_NE(e.find(what), std::string::npos) << "error: " << e << "\nexpected: " << what;
  };
  // The .bin shorter or longer than the index says.
  has(variant("short_bin", idx, bin.substr(0, 16)), "sequence 2 ends at byte 18 but " + (dir / "short_bin.bin") + " holds 16 bytes");
  has(variant("long_bin", idx, bin + "xx"), "holds 20 bytes but " + (dir / "long_bin.idx") + " accounts for 18");
  // Truncated index: header, then arrays.
  has(variant("trunc_hdr", idx.substr(0, 20), bin), "truncated index: 20 bytes");
  has(variant("trunc_arr", idx.substr(0, idx.size() - 8), bin), "truncated index: the header declares 3 sequences");
  has(variant("trailing", idx + "abcdefghij", bin), "10 trailing bytes");
  std::string i = idx;
  i[0] = 'X';
  has(variant("magic", i, bin), "bad magic");
  i = idx;
  put<uint64_t>(i, 9, 2);
  has(variant("version", i, bin), "unsupported index version 2");
  i = idx;
  i[17] = 9;
  has(variant("dtype", i, bin), "unknown dtype code 9");
  i[17] = 7;
  has(variant("float", i, bin), "dtype float32 (code 7) does not hold token ids");
  // Pointers out of order, or with a gap.
  i = idx;
  put<int64_t>(i, ptrs + 8, 8);
  put<int64_t>(i, ptrs + 16, 6);
  has(variant("order", i, bin), "sequence 1 starts at byte 8 but sequence 0 ends at byte 6");
  i = idx;
  put<int64_t>(i, ptrs, 2);
  has(variant("first", i, bin), "sequence 0 starts at byte 2 but the first must start at byte 0");
  i = idx;
  put<int32_t>(i, 34 + 4, -1);
  has(variant("neglen", i, bin), "sequence 1 has negative length -1");
  // Document indices.
  i = idx;
  put<int64_t>(i, docs + 8, 2);
  put<int64_t>(i, docs + 16, 1);
  has(variant("docs_order", i, bin), "document index 2 (1) is below the one before it (2)");
  i = idx;
  put<int64_t>(i, docs + 24, 2);
  has(variant("docs_end", i, bin), "the last document index is 2 but the dataset holds 3 sequences");
  i = idx;
  put<int64_t>(i, docs, 1);
  has(variant("docs_start", i, bin), "document index 0 is 1, not 0");
  // Missing files.
  EXPECT_NE(error_of([&] { MegatronDataset ds(dir / "nothing"); }).find(dir / "nothing.idx"), std::string::npos);
  fs::remove(good + ".bin");
  EXPECT_NE(error_of([&] { MegatronDataset ds(good); }).find(good + ".bin"), std::string::npos);
  // A multimodal index (a mode byte per sequence after the arrays) is read.
  write_bytes(dir / "mm.idx", idx + std::string(S, '\0'));
  write_bytes(dir / "mm.bin", bin);
  EXPECT_EQ(MegatronDataset(dir / "mm").tokens(), 9u);
}

TEST(Megatron, LoaderMatchesShardsOfTheSameTokens) {
  TempDir dir("loader");
  const uint32_t vocab = 300;
  const auto a = make_docs(120, vocab, 1), b = make_docs(90, vocab, 2);
  // Source a as two shards vs. one Megatron dataset; source b as one shard vs. Megatron.
  const auto ta = concat(a), tb = concat(b);
  const size_t half = ta.size() / 2;
  write_shard(dir / "a0.bin", std::span(ta).first(half), vocab);
  write_shard(dir / "a1.bin", std::span(ta).subspan(half), vocab);
  write_shard(dir / "b0.bin", tb, vocab);
  write_megatron(dir / "a", a, vocab);
  write_megatron(dir / "b", b, vocab);
  std::vector<DataSource> shards = {{"a", {dir / "a0.bin", dir / "a1.bin"}, {}}, {"b", {dir / "b0.bin"}, {}}};
  std::vector<DataSource> mixed = {{"a", {}, dir / "a"}, {"b", {dir / "b0.bin"}, {}}};
  std::vector<DataSource> meg = {{"a", {}, dir / "a"}, {"b", {}, dir / "b"}};
  EXPECT_NE(error_of([&] { DataLoader dl(meg, 1); }).find("vocab_size"), std::string::npos);

  auto run = [&](DataLoader& dl, int steps) {
    std::vector<int32_t> all, batch;
    for (int s = 0; s < steps; ++s) {
      if (s == 5) dl.set_phase({1.0, 3.0}, 24);  // a phase change mid-way
      dl.next_batch(4, 0, 1, batch);
      all.insert(all.end(), batch.begin(), batch.end());
    }
    return all;
  };
  DataLoader ls(shards, 17, false, 512), lm(meg, 17, false, 512), lx(mixed, 17, false, 512);
  for (DataLoader* dl : {&ls, &lm, &lx}) dl->set_phase({2.0, 1.0}, 16);
  EXPECT_EQ(lm.source(0).size(), ta.size());
  EXPECT_EQ(lm.vocab_size(), 512u);
  EXPECT_EQ(lx.vocab_size(), vocab);  // the shards' own vocabulary
  const auto want = run(ls, 80);
  EXPECT_EQ(run(lm, 80), want);
  EXPECT_EQ(run(lx, 80), want);
  EXPECT_GT(ls.epoch_of(0), 0u);  // the run went through more than one epoch of source a
  EXPECT_EQ(ls.state().dump(), lm.state().dump());

  // Validation windows agree too.
  TokenStream vs(open_token_stream(shards[0], "a/val")), vm(open_token_stream(meg[0], "a/val", vocab));
  ASSERT_EQ(num_eval_windows(vs, 16), num_eval_windows(vm, 16));
  std::vector<int32_t> ws(17), wm(17);
  for (uint64_t k = 0; k < num_eval_windows(vs, 16); ++k) {
    eval_window(vs, 16, k, ws.data());
    eval_window(vm, 16, k, wm.data());
    ASSERT_EQ(ws, wm) << "window " << k;
  }

  // Tokens beyond the limit the loader is given are refused as they are read.
  DataLoader small(meg, 17, false, 100);
  small.set_phase({1.0, 1.0}, 16);
  std::vector<int32_t> batch;
  std::string e = error_of([&] {
    for (int s = 0; s < 10; ++s) small.next_batch(4, 0, 1, batch);
  });
  EXPECT_NE(e.find("out of the vocabulary (size 100)"), std::string::npos) << e;
  e = error_of([&] { DataLoader dl(meg, 1, /*check_tokens=*/true, 100); });
  EXPECT_NE(e.find(".bin: token "), std::string::npos) << e;
}

TEST(Megatron, LoaderStateRestoresExactly) {
  TempDir dir("state");
  write_megatron(dir / "a", make_docs(80, 300, 3), 300);
  write_megatron(dir / "b", make_docs(60, 300, 4), 300);
  std::vector<DataSource> meg = {{"a", {}, dir / "a"}, {"b", {}, dir / "b"}};
  DataLoader a(meg, 9, false, 300);
  a.set_phase({1.0, 2.0}, 12);
  std::vector<int32_t> batch;
  for (int s = 0; s < 13; ++s) a.next_batch(6, 0, 1, batch);
  const auto st = a.state();
  DataLoader b(meg, 1234, false, 300);  // another seed: the state carries everything
  b.load_state(st);
  std::vector<int32_t> ba, bb;
  for (int s = 0; s < 20; ++s) {
    a.next_batch(6, 0, 1, ba);
    b.next_batch(6, 0, 1, bb);
    ASSERT_EQ(ba, bb) << "step " << s;
  }
  EXPECT_EQ(a.state().dump(), b.state().dump());
  // The state names the source's token count: another dataset under the same name is refused.
  write_megatron(dir / "c", make_docs(81, 300, 3), 300);
  DataLoader c({{"a", {}, dir / "c"}, {"b", {}, dir / "b"}}, 9, false, 300);
  EXPECT_NE(error_of([&] { c.load_state(st); }).find("tokens when saved"), std::string::npos);
}
