// Data pipeline: tokenizer, token shards, the mixing/packing loader and `zaya prepare`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_util.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

const char* kSample = ZAYA_SOURCE_DIR "/tests/data/kjv_sample.txt";

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("data", tag) {}
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using test_util::error_of;

// A model trained once on the sample and shared by the tests below.
const std::string& sample_model() {
  static TempDir dir("model");
  static std::string path = [] {
    SentencePieceTrainOptions o;
    o.vocab_size = 400;
    o.threads = 2;
    train_sentencepiece({kSample}, dir / "sample.model", o);
    return dir / "sample.model";
  }();
  return path;
}

}  // namespace

// ---------------------------------------------------------------- tokenizer

TEST(Tokenizer, TrainLoadRoundTrip) {
  auto tok = load_tokenizer(sample_model());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->document_prefix(), (std::vector<int32_t>{1}));  // training puts an EOS between documents
  EXPECT_EQ(tok->id_to_piece(1), "<eos>");
  EXPECT_EQ(tok->piece_to_id("<bos>"), 2);
  EXPECT_EQ(tok->piece_to_id("no-such-piece-here"), -1);
  EXPECT_GE(tok->piece_to_id("\n"), 0);  // newlines inside documents have their own piece

  std::string text = read_text(kSample);
  std::vector<int32_t> ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size() * 6 / 10);  // it learned merges: about 2 bytes per token
  EXPECT_EQ(tok->decode(ids), text);
  // Byte fallback: text outside the training alphabet still round-trips exactly.
  std::string odd = "Zoë sings 42 \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac\n\n  tabs\there";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);
  for (int32_t id : tok->encode(odd)) EXPECT_NE(id, tok->unk_id());

  std::string e = error_of([&] { tok->decode(std::vector<int32_t>{5, 400}); });
  EXPECT_NE(e.find(sample_model()), std::string::npos) << e;
  EXPECT_NE(e.find("400"), std::string::npos) << e;
}

TEST(Tokenizer, UnigramTrains) {
  TempDir dir("unigram");
  SentencePieceTrainOptions o;
  o.vocab_size = 350;
  o.model_type = "unigram";
  o.threads = 2;
  train_sentencepiece({kSample}, dir / "u.model", o);
  auto tok = SentencePieceTokenizer::load(dir / "u.model");
  EXPECT_EQ(tok->vocab_size(), 350);
  std::string s = "And God said, Let there be light: and there was light.";
  EXPECT_EQ(tok->decode(tok->encode(s)), s);
}

TEST(Tokenizer, ErrorsNameTheFile) {
  TempDir dir("tokerr");
  std::string missing = dir / "missing.model";
  EXPECT_NE(error_of([&] { load_tokenizer(missing); }).find(missing), std::string::npos);
  std::string junk = dir / "junk.model";
  std::ofstream(junk) << "this is not a protobuf";
  EXPECT_NE(error_of([&] { load_tokenizer(junk); }).find(junk), std::string::npos);
  std::string hf = dir / "tokenizer.json";
  std::ofstream(hf) << "{}";
  EXPECT_NE(error_of([&] { load_tokenizer(hf); }).find("tokenizer.json"), std::string::npos);
  SentencePieceTrainOptions o;
  o.model_type = "wordpiece";
  EXPECT_NE(error_of([&] { train_sentencepiece({kSample}, dir / "x.model", o); }).find("wordpiece"),
            std::string::npos);
  EXPECT_NE(error_of([&] { train_sentencepiece({missing}, dir / "x.model", {}); }).find(missing), std::string::npos);
}

// ---------------------------------------------------------------- shards

TEST(Shard, WriteRead) {
  TempDir dir("shard");
  std::vector<uint32_t> toks = {5, 0, 99, 1, 42, 1};
  std::string p = dir / "a.bin";
  write_shard(p, toks, 100);
  EXPECT_EQ(fs::file_size(p), kShardHeaderBytes + 4 * toks.size());
  for (const auto& e : fs::directory_iterator(dir.path))  // no temporary left behind
    EXPECT_EQ(e.path().filename(), "a.bin");
  std::string raw = read_text(p);
  EXPECT_EQ(raw.substr(0, 8), "ZAYATOK1");
  ShardReader r(p);
  EXPECT_EQ(r.header().version, 1u);
  EXPECT_EQ(r.header().dtype, 1u);
  EXPECT_EQ(r.size(), toks.size());
  EXPECT_EQ(r.vocab_size(), 100u);
  EXPECT_EQ(std::vector<uint32_t>(r.tokens().begin(), r.tokens().end()), toks);
  r.check_tokens();
  EXPECT_NE(error_of([&] { r.check_tokens(50); }).find("99"), std::string::npos);

  {  // streaming writer; an unfinished writer leaves nothing behind
    ShardWriter w(dir / "b.bin", 10);
    w.append(std::vector<uint32_t>{1, 2});
    w.append(std::vector<uint32_t>{3});
    EXPECT_NE(error_of([&] { w.append(std::vector<uint32_t>{10}); }).find("b.bin"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir / "b.bin"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);
  write_shard(dir / "empty.bin", {}, 7);
  EXPECT_EQ(ShardReader(dir / "empty.bin").size(), 0u);
}

TEST(Shard, CorruptFilesGiveOneLineErrorsNamingTheFile) {
  TempDir dir("corrupt");
  std::vector<uint32_t> toks(100, 3);
  std::string good = dir / "good.bin";
  write_shard(good, toks, 10);
  auto expect_error = [](const std::string& path, const std::string& what) {
    std::string e = error_of([&] { ShardReader r(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  std::string trunc = dir / "trunc.bin";
  fs::copy_file(good, trunc);
  fs::resize_file(trunc, fs::file_size(trunc) - 3);
  expect_error(trunc, "truncated");
  std::string stub = dir / "stub.bin";
  fs::copy_file(good, stub);
  fs::resize_file(stub, 20);
  expect_error(stub, "truncated");
  std::string trailing = dir / "trailing.bin";
  fs::copy_file(good, trailing);
  fs::resize_file(trailing, fs::file_size(trailing) + 4);
  expect_error(trailing, "trailing");

  std::string raw = read_text(good);
  auto write_raw = [&](const std::string& name, std::string bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
  };
  std::string bad_magic = raw;
  bad_magic[3] = 'X';
  expect_error(write_raw("magic.bin", bad_magic), "bad magic");
  std::string bad_version = raw;
  bad_version[8] = 7;
  expect_error(write_raw("version.bin", bad_version), "version 7");
  std::string bad_dtype = raw;
  bad_dtype[12] = 2;
  expect_error(write_raw("dtype.bin", bad_dtype), "dtype");
  expect_error(dir / "absent.bin", "cannot open");

  std::string oov = raw;  // token 57 at index 60 with vocab 10
  oov[kShardHeaderBytes + 4 * 60] = 57;
  std::string p = write_raw("oov.bin", oov);
  ShardReader r(p);  // the header is fine; the scan finds it
  std::string e = error_of([&] { r.check_tokens(); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("token 57 at index 60"), std::string::npos) << e;
  e = error_of([&] { DataLoader({{"oov", {good, p}}}, 1, /*check_tokens=*/true); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
}

// ---------------------------------------------------------------- loader

namespace {

// Sources whose token at stream position i is base + i, so windows can be traced back.
struct SyntheticSources {
  TempDir dir{"loader"};
  std::vector<DataSource> sources;
  static constexpr uint32_t kVocab = 1u << 20;
  SyntheticSources() {
    sources.push_back(make("a", 0, {3000, 1, 2500, 4000}));  // a shard of one token, windows span shards
    sources.push_back(make("b", 500000, {2700}));
  }
  DataSource make(const std::string& name, uint32_t base, std::vector<uint32_t> sizes) {
    DataSource s{name, {}};
    uint32_t pos = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint32_t> t(sizes[k]);
      for (auto& x : t) x = base + pos++;
      s.shards.push_back(dir / (name + std::to_string(k) + ".bin"));
      write_shard(s.shards.back(), t, kVocab);
    }
    return s;
  }
};

std::vector<std::vector<int32_t>> run_batches(DataLoader& dl, int steps, int gb, int rank = 0, int world = 1) {
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> b;
  for (int i = 0; i < steps; ++i) {
    dl.next_batch(gb, rank, world, b);
    out.push_back(b);
  }
  return out;
}

}  // namespace

TEST(Loader, PermutationIsABijection) {
  for (uint64_t n : {1, 2, 3, 7, 64, 100, 1000, 4097}) {
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < n; ++i) seen.insert(permute_index(i, n, 12345 + n));
    EXPECT_EQ(seen.size(), n);
    EXPECT_LT(*seen.rbegin(), n);
  }
}

TEST(Loader, PacksContiguousWindowsAndCoversAnEpoch) {
  SyntheticSources src;
  DataLoader dl({src.sources[0]}, 7);
  const int T = 64;
  dl.set_phase({1.0}, T);
  const uint64_t N = dl.source(0).size();
  ASSERT_EQ(N, 9501u);
  std::vector<int32_t> b;
  std::set<int32_t> starts;
  uint64_t epoch_windows = 0;
  while (dl.epoch_of(0) == 0) {
    dl.next_batch(1, 0, 1, b);
    ASSERT_EQ(b.size(), size_t(T + 1));
    for (int k = 0; k < T; ++k) ASSERT_EQ(b[k + 1], b[k] + 1);  // contiguous, across shard joins too
    if (dl.epoch_of(0) == 0) {
      starts.insert(b[0]);
      ++epoch_windows;
    }
  }
  // One epoch visits every window of stride T exactly once, from one offset in [0, T).
  EXPECT_EQ(starts.size(), epoch_windows);
  int32_t offset = *starts.begin();
  EXPECT_LT(offset, T);
  for (int32_t s : starts) EXPECT_EQ((s - offset) % T, 0);
  EXPECT_EQ(epoch_windows, (N - uint64_t(offset) - 1) / T);
}

TEST(Loader, DeterministicFromTheSeed) {
  SyntheticSources src;
  DataLoader a(src.sources, 42), b(src.sources, 42), c(src.sources, 43);
  for (auto* dl : {&a, &b, &c}) dl->set_phase({0.5, 0.5}, 32);
  auto ra = run_batches(a, 20, 8), rb = run_batches(b, 20, 8), rc = run_batches(c, 20, 8);
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
  EXPECT_EQ(a.state(), b.state());
}

TEST(Loader, StateRoundTripContinuesExactly) {
  SyntheticSources src;
  DataLoader a(src.sources, 9);
  a.set_phase({0.7, 0.3}, 48);
  run_batches(a, 130, 4);  // several epochs of each source
  ASSERT_GT(a.epoch_of(0), 0u);
  std::string saved = a.state().dump();
  DataLoader b(src.sources, 1234);  // another seed: the state carries everything
  b.load_state(nlohmann::json::parse(saved));
  EXPECT_EQ(b.state(), a.state());
  EXPECT_EQ(run_batches(a, 60, 4), run_batches(b, 60, 4));
  // A later phase change behaves the same on both.
  a.set_phase({0.2, 0.8}, 16);
  b.set_phase({0.2, 0.8}, 16);
  EXPECT_EQ(run_batches(a, 30, 6), run_batches(b, 30, 6));
  EXPECT_EQ(b.state(), a.state());
}

TEST(Loader, StateMismatchErrorsNameTheField) {
  SyntheticSources src;
  DataLoader a(src.sources, 9);
  a.set_phase({1, 1}, 8);
  nlohmann::json st = a.state();
  DataLoader only_a({src.sources[0]}, 9);
  EXPECT_NE(error_of([&] { only_a.load_state(st); }).find("2 sources saved"), std::string::npos);
  nlohmann::json bad = st;
  bad["sources"][1]["tokens"] = 5;
  EXPECT_NE(error_of([&] { a.load_state(bad); }).find("\"b\" had 5 tokens"), std::string::npos);
  bad = st;
  bad["mix_rng"].erase("counter");
  EXPECT_NE(error_of([&] { a.load_state(bad); }).find("mix_rng.counter"), std::string::npos);
}

TEST(Loader, MixingWeightsAreRespected) {
  SyntheticSources src;
  DataLoader dl(src.sources, 5);
  dl.set_phase({3.0, 1.0}, 16);
  std::vector<int32_t> b;
  int from_a = 0, total = 0;
  for (int i = 0; i < 500; ++i) {
    dl.next_batch(8, 0, 1, b);
    for (int r = 0; r < 8; ++r, ++total) from_a += b[size_t(r) * 17] < 500000;
  }
  EXPECT_NEAR(double(from_a) / total, 0.75, 0.03);
  EXPECT_EQ(dl.samples_from(0) + dl.samples_from(1), uint64_t(total));
  EXPECT_EQ(dl.samples_from(0), uint64_t(from_a));
  dl.set_phase({0.0, 1.0}, 16);  // a phase can switch a source off
  uint64_t before = dl.samples_from(0);
  run_batches(dl, 20, 8);
  EXPECT_EQ(dl.samples_from(0), before);
}

TEST(Loader, DataParallelRanksTakeTheSameGlobalSamples) {
  SyntheticSources src;
  const int GB = 8, steps = 25;
  DataLoader one(src.sources, 3);
  one.set_phase({0.6, 0.4}, 20);
  auto whole = run_batches(one, steps, GB);
  for (int world : {2, 4}) {
    std::vector<std::unique_ptr<DataLoader>> ranks;
    std::vector<std::vector<std::vector<int32_t>>> got;
    for (int r = 0; r < world; ++r) {
      ranks.push_back(std::make_unique<DataLoader>(src.sources, 3));
      ranks.back()->set_phase({0.6, 0.4}, 20);
      got.push_back(run_batches(*ranks.back(), steps, GB, r, world));
    }
    for (int s = 0; s < steps; ++s) {
      std::vector<int32_t> joined;
      for (int r = 0; r < world; ++r) joined.insert(joined.end(), got[r][s].begin(), got[r][s].end());
      EXPECT_EQ(joined, whole[s]) << "world " << world << " step " << s;
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(ranks[r]->state(), one.state());
  }
  std::vector<int32_t> b;
  EXPECT_NE(error_of([&] { one.next_batch(6, 0, 4, b); }).find("multiple"), std::string::npos);
}

TEST(Loader, PhaseChangeSwitchesSequenceLength) {
  SyntheticSources src;
  DataLoader dl(src.sources, 11);
  dl.set_phase({1, 1}, 32);
  auto first = run_batches(dl, 3, 4);
  EXPECT_EQ(first[0].size(), 4u * 33);
  dl.set_phase({1, 1}, 128);
  auto second = run_batches(dl, 3, 4);
  ASSERT_EQ(second[0].size(), 4u * 129);
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 128; ++k) ASSERT_EQ(second[0][r * 129 + k + 1], second[0][r * 129 + k] + 1);
  EXPECT_GE(dl.epoch_of(0) + dl.epoch_of(1), 1u);  // re-laid out for the new length
  EXPECT_NE(error_of([&] { dl.set_phase({1, 1}, 5000); }).find("\"b\""), std::string::npos);
  EXPECT_NE(error_of([&] { dl.set_phase({1}, 8); }).find("1 weights for 2 sources"), std::string::npos);
}

TEST(Loader, EvalWindowsAreSequential) {
  SyntheticSources src;
  TokenStream s("b", src.sources[1].shards);
  EXPECT_EQ(num_eval_windows(s, 100), 26u);  // (2700 - 1) / 100
  std::vector<int32_t> w(101);
  eval_window(s, 100, 25, w.data());
  EXPECT_EQ(w[0], 500000 + 2500);
  EXPECT_EQ(w[100], 500000 + 2600);
  EXPECT_NE(error_of([&] { eval_window(s, 100, 26, w.data()); }).find("out of range"), std::string::npos);
}

// ---------------------------------------------------------------- prepare

TEST(Prepare, EndToEndOnTheSample) {
  TempDir dir("prepare");
  PrepareOptions o;
  o.inputs = {kSample};
  o.out_dir = dir / "out";
  o.train.vocab_size = 400;
  o.train.threads = 2;
  o.val_fraction = 0.25;
  o.shard_tokens = 1000;
  o.progress_seconds = 0;
  PrepareResult r = prepare_corpus(o);
  EXPECT_EQ(r.vocab_size, 400);
  EXPECT_EQ(r.train.documents + r.val.documents, 14u);  // 14 chapters in the sample
  EXPECT_GT(r.val.documents, 0u);
  EXPECT_GT(r.train.shards.size(), 1u);
  EXPECT_GT(r.train_unigram_entropy, 3.0);
  EXPECT_GT(r.val_unigram_cross_entropy, r.train_unigram_entropy);

  nlohmann::json meta = nlohmann::json::parse(read_text(r.meta_path));
  EXPECT_EQ(meta["train"]["tokens"], r.train.tokens);
  EXPECT_EQ(meta["val"]["tokens"], r.val.tokens);
  EXPECT_EQ(meta["tokenizer"]["vocab_size"], 400);
  EXPECT_EQ(meta["tokenizer"]["eos_id"], 1);
  EXPECT_EQ(meta["train"]["shards"][0], "train_000.bin");
  EXPECT_EQ(meta["val"]["shards"][0], "val_000.bin");

  // Every shard is valid; decoding the documents gives back the sample's chapters.
  auto tok = load_tokenizer(r.tokenizer_path);
  std::string sample = read_text(kSample);
  uint64_t docs = 0, tokens = 0;
  for (const auto* split : {&r.train, &r.val}) {
    TokenStream ts("t", split->shards, /*check_tokens=*/true);
    tokens += ts.size();
    std::vector<int32_t> all(ts.size());
    ts.read(0, ts.size(), all.data());
    ASSERT_EQ(all.back(), tok->eos_id());
    std::vector<int32_t> doc;
    for (int32_t t : all) {
      if (t != tok->eos_id()) {
        doc.push_back(t);
        continue;
      }
      std::string text = tok->decode(doc);
      EXPECT_NE(sample.find(text + "\n"), std::string::npos) << text.substr(0, 60);
      doc.clear();
      ++docs;
    }
  }
  EXPECT_EQ(docs, 14u);
  EXPECT_EQ(tokens, r.train.tokens + r.val.tokens);

  // The loader reads what prepare wrote.
  DataLoader dl({{"train", r.train.shards}}, 1, true);
  dl.set_phase({1}, 64);
  std::vector<int32_t> b;
  dl.next_batch(4, 0, 1, b);
  EXPECT_EQ(b.size(), 4u * 65);

  // Same split and tokens with the saved tokenizer; --max-tokens stops exactly there and the
  // shards of the bigger earlier run are removed.
  PrepareOptions o2 = o;
  o2.tokenizer = r.tokenizer_path;
  o2.max_tokens = 1500;
  PrepareResult r2 = prepare_corpus(o2);
  EXPECT_EQ(r2.train.tokens + r2.val.tokens, 1500u);
  EXPECT_TRUE(r2.hit_max_tokens);
  EXPECT_EQ(r2.vocab_size, 400);
  size_t bins = 0;
  for (const auto& e : fs::directory_iterator(o.out_dir)) bins += e.path().extension() == ".bin";
  EXPECT_EQ(bins, r2.train.shards.size() + r2.val.shards.size());
  PrepareOptions o3 = o;
  o3.out_dir = dir / "again";
  o3.tokenizer = r.tokenizer_path;
  PrepareResult r3 = prepare_corpus(o3);
  EXPECT_EQ(r3.train.tokens, r.train.tokens);
  EXPECT_EQ(r3.val.tokens, r.val.tokens);
  EXPECT_EQ(read_text(r3.tokenizer_path), read_text(r.tokenizer_path));

  std::string e = error_of([&] {
    PrepareOptions bad = o;
    bad.inputs = {dir / "nope.txt"};
    prepare_corpus(bad);
  });
  EXPECT_NE(e.find("nope.txt"), std::string::npos) << e;
}

// A tokenizer.json goes into the data directory under its own name with its config, replaces
// a SentencePiece model left there by an earlier run (and the other way round), and is what
// a run and its checkpoints pick up.
TEST(Prepare, TokenizerJsonKeepsItsName) {
  TempDir dir("prepare_json");
  fs::create_directories(dir / "src");
  test_util::write_byte_tokenizer(dir / "src");
  PrepareOptions o;
  o.inputs = {kSample};
  o.out_dir = dir / "out";
  o.tokenizer = sample_model();
  o.max_tokens = 800;
  o.progress_seconds = 0;
  prepare_corpus(o);
  EXPECT_EQ(find_model_tokenizer(o.out_dir), dir / "out/tokenizer.model");
  o.tokenizer = dir / "src/tokenizer.json";
  PrepareResult r = prepare_corpus(o);
  EXPECT_EQ(r.tokenizer_path, dir / "out/tokenizer.json");
  EXPECT_EQ(r.vocab_size, 260);
  EXPECT_FALSE(fs::exists(dir / "out/tokenizer.model"));
  EXPECT_EQ(read_text(dir / "out/tokenizer_config.json"), read_text(dir / "src/tokenizer_config.json"));
  EXPECT_EQ(find_model_tokenizer(o.out_dir), dir / "out/tokenizer.json");
  nlohmann::json meta = nlohmann::json::parse(read_text(r.meta_path));
  EXPECT_EQ(meta["tokenizer"]["file"], "tokenizer.json");
  EXPECT_EQ(meta["tokenizer"]["kind"], "tokenizer.json");
  EXPECT_EQ(tokenizer_files(r.tokenizer_path).size(), 2u);  // travels with its config
  o.tokenizer = sample_model();
  prepare_corpus(o);
  EXPECT_FALSE(fs::exists(dir / "out/tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir / "out/tokenizer_config.json"));
  EXPECT_EQ(find_model_tokenizer(o.out_dir), dir / "out/tokenizer.model");
}

TEST(Prepare, CommandLine) {
  TempDir dir("cli");
  std::string cmd = std::string(ZAYA_BIN) + " prepare --input " + kSample + " --out " + (dir / "o") +
                    " --tokenizer " + sample_model() + " --val-fraction 0.2 --max-tokens 2000 > " + (dir / "log") +
                    " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(dir / "log");
  nlohmann::json meta = nlohmann::json::parse(read_text(dir / "o/meta.json"));
  EXPECT_EQ(meta["train"]["tokens"].get<uint64_t>() + meta["val"]["tokens"].get<uint64_t>(), 2000u);
  std::string bad = std::string(ZAYA_BIN) + " prepare --input " + kSample + " --out " + (dir / "p") +
                    " --tokenizer " + (dir / "missing.model") + " > " + (dir / "log2") + " 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  std::string log = read_text(dir / "log2");
  EXPECT_NE(log.find("missing.model"), std::string::npos) << log;
}
