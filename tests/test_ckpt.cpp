// Checkpoints: manifest round trip with sliced tensors, checksum and missing-file errors,
// atomic publication (no partial directory visible, `latest` only ever names complete
// checkpoints), keep-last-K retention, path resolution (step dir, manifest, root, `latest`
// file, run dir). safetensors header validation, one test per rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "test_util.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("ckpt", tag) {}
};

using test_util::error_of;

std::vector<float> iota_f(size_t n, float base) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), base);
  return v;
}

// A checkpoint of two tensors: "w" [4, 6] split across two files as ZeRO-1 shards would
// be (elements [0, 10) and [10, 24)), and "b" [5] whole.
std::string save_example(const std::string& root, int64_t step, const std::vector<float>& w,
                         const std::vector<float>& b) {
  CheckpointWriter r0(root, step);
  r0.add_f32("optim-r00000.safetensors", "w", {4, 6}, 0, 10, w.data());
  r0.add_f32("params.safetensors", "b", {5}, 0, 5, b.data());
  std::vector<nlohmann::json> pieces = {r0.write_files()};
  CheckpointWriter r1(root, step);  // a second "rank" writing into the same directory
  r1.add_f32("optim-r00001.safetensors", "w", {4, 6}, 10, 14, w.data() + 10);
  pieces.push_back(r1.write_files());
  nlohmann::json header = {{"state", {{"trainer", {{"step", step}}}}}};
  return r0.commit(header, pieces);
}

}  // namespace

TEST(Checkpoint, RoundTripWithSlicesAcrossFiles) {
  TempDir d("roundtrip");
  auto w = iota_f(24, 0.5f), b = iota_f(5, -2.f);
  std::string dir = save_example(d.str(), 10, w, b);
  EXPECT_EQ(fs::path(dir).filename(), "step_00000010");
  Checkpoint ck(d.str());  // via `latest`
  EXPECT_EQ(ck.step(), 10);
  ASSERT_TRUE(ck.has("w"));
  EXPECT_EQ(ck.tensor("w").slices.size(), 2u);
  EXPECT_EQ(ck.tensor("w").shape, (std::vector<int64_t>{4, 6}));
  std::vector<float> got(24);
  ck.read("w", got.data(), 0, Checkpoint::npos, {4, 6});
  EXPECT_EQ(got, w);
  std::vector<float> part(6);
  ck.read("w", part.data(), 7, 6);  // straddles the two files
  EXPECT_EQ(part, std::vector<float>(w.begin() + 7, w.begin() + 13));
  std::vector<float> gb(5);
  ck.read("b", gb.data());
  EXPECT_EQ(gb, b);
  ck.verify();
  // The manifest's byte ranges point at the tensor bytes in the file.
  const auto& s = ck.tensor("b").slices[0];
  std::ifstream in(fs::path(dir) / s.file, std::ios::binary);
  in.seekg(std::streamoff(s.byte_begin));
  std::vector<float> raw(5);
  in.read(reinterpret_cast<char*>(raw.data()), 20);
  EXPECT_EQ(raw, b);
  EXPECT_EQ(s.byte_end - s.byte_begin, 20u);
  EXPECT_THROW(ck.read("w", got.data(), {0}, Checkpoint::npos, {6, 4}), Error);  // wrong shape
}

TEST(Checkpoint, ChecksumMismatchNamesFileAndTensor) {
  TempDir d("checksum");
  auto w = iota_f(24, 0.f), b = iota_f(5, 1.f);
  std::string dir = save_example(d.str(), 1, w, b);
  uint64_t at = 0;
  {
    Checkpoint ck(dir);
    at = ck.tensor("w").slices[1].byte_begin + 8;
  }
  {
    std::fstream f(fs::path(dir) / "optim-r00001.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(at));
    f.put('\x7f');
  }
  Checkpoint ck(dir);
  std::vector<float> got(24);
  ck.read("b", got.data());  // the untouched tensor still reads
  std::string e = error_of([&] { ck.read("w", got.data()); });
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("optim-r00001.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor w"), std::string::npos) << e;
  Checkpoint fresh(dir);
  EXPECT_THROW(fresh.verify(), Error);
}

TEST(Checkpoint, MissingFileAndBadPathsAreClearErrors) {
  TempDir d("missing");
  auto w = iota_f(24, 0.f), b = iota_f(5, 1.f);
  std::string dir = save_example(d.str(), 3, w, b);
  fs::remove(fs::path(dir) / "params.safetensors");
  std::string e = error_of([&] { Checkpoint ck(dir); });
  EXPECT_NE(e.find("params.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  e = error_of([&] { Checkpoint ck(d.str() + "/nowhere"); });
  EXPECT_NE(e.find("nowhere"), std::string::npos) << e;
  std::ofstream(fs::path(dir) / "manifest.json") << "{ not json";
  e = error_of([&] { Checkpoint ck(dir); });
  EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
}

TEST(Checkpoint, AtomicPublicationAndRetention) {
  TempDir d("atomic");
  auto w = iota_f(24, 0.f), b = iota_f(5, 1.f);
  save_example(d.str(), 1, w, b);
  // A save that dies before commit: its files exist only under a hidden temporary name,
  // no step directory appears, and `latest` still names the previous checkpoint.
  {
    CheckpointWriter dying(d.str(), 2);
    dying.add_f32("params.safetensors", "b", {5}, 0, 5, b.data());
    dying.write_files();
    EXPECT_TRUE(fs::exists(dying.temp_dir()));
    EXPECT_EQ(fs::path(dying.temp_dir()).filename().string()[0], '.');
    EXPECT_FALSE(fs::exists(dying.final_dir()));
  }
  EXPECT_EQ(list_checkpoints(d.str()).size(), 1u);
  EXPECT_EQ(Checkpoint(d.str()).step(), 1);
  remove_stale_temporaries(d.str());
  for (auto& e : fs::directory_iterator(d.path)) EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u);
  // Every published directory is complete, and keep-last-K keeps the newest K.
  for (int64_t s = 2; s <= 5; ++s) {
    save_example(d.str(), s, w, b);
    prune_checkpoints(d.str(), 2);
    for (const std::string& dir : list_checkpoints(d.str())) Checkpoint(dir).verify();
  }
  auto left = list_checkpoints(d.str());
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(fs::path(left[0]).filename(), "step_00000004");
  EXPECT_EQ(Checkpoint(d.str()).step(), 5);
  // Re-saving an existing step (after a rollback) replaces it.
  auto w2 = iota_f(24, 100.f);
  save_example(d.str(), 5, w2, b);
  std::vector<float> got(24);
  Checkpoint(d.str()).read("w", got.data());
  EXPECT_EQ(got, w2);
}

TEST(Checkpoint, ResolvesStepDirRootAndRunDir) {
  TempDir d("resolve");
  auto w = iota_f(24, 0.f), b = iota_f(5, 1.f);
  std::string dir = save_example(d.str() + "/ckpt", 7, w, b);
  EXPECT_EQ(Checkpoint::resolve(dir), dir);
  EXPECT_EQ(fs::path(Checkpoint::resolve(d.str() + "/ckpt")).filename(), "step_00000007");
  EXPECT_EQ(fs::path(Checkpoint::resolve(d.str())).filename(), "step_00000007");  // a run dir
  // The `latest` pointer file itself, and the manifest file, name the same checkpoint.
  EXPECT_EQ(Checkpoint::resolve(d.str() + "/ckpt/latest"), dir);
  EXPECT_EQ(Checkpoint::resolve(dir + "/manifest.json"), dir);
  EXPECT_EQ(Checkpoint(d.str() + "/ckpt/latest").step(), 7);
  for (const std::string& p : {dir, d.str() + "/ckpt", d.str(), d.str() + "/ckpt/latest", dir + "/manifest.json"})
    EXPECT_TRUE(Checkpoint::is_checkpoint_path(p)) << p;
  EXPECT_FALSE(Checkpoint::is_checkpoint_path(d.str() + "/nowhere"));
  EXPECT_FALSE(Checkpoint::is_checkpoint_path(d.str() + "/ckpt/step_00000007/params.safetensors/x"));
  // Files that are not pointers, pointers to nothing, and missing paths: one line naming them.
  std::ofstream(d / "notes.txt") << "step_00000007 and more\n";
  std::string e = error_of([&] { Checkpoint::resolve(d / "notes.txt"); });
  EXPECT_NE(e.find("notes.txt: does not name a step directory"), std::string::npos) << e;
  std::ofstream(d / "ckpt/stale") << "step_00000009\n";
  e = error_of([&] { Checkpoint::resolve(d / "ckpt/stale"); });
  EXPECT_NE(e.find("stale names step_00000009 but"), std::string::npos) << e;
  {  // a binary file is not echoed into the message
    std::ofstream(d / "bin", std::ios::binary) << std::string("\x08\0\0\0\0\0\0\0{\"a\":\n}", 15);
  }
  e = error_of([&] { Checkpoint::resolve(d / "bin"); });
  EXPECT_NE(e.find("bin: does not name a step directory"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  std::ofstream(d / "ckpt/up") << "..\n";
  e = error_of([&] { Checkpoint::resolve(d / "ckpt/up"); });
  EXPECT_NE(e.find("does not name a step directory"), std::string::npos) << e;
  e = error_of([&] { Checkpoint::resolve(d / "nowhere"); });
  EXPECT_NE(e.find("nowhere: does not exist"), std::string::npos) << e;
  fs::create_directories(d / "empty");
  e = error_of([&] { Checkpoint::resolve(d / "empty"); });
  EXPECT_NE(e.find("empty: no manifest.json, latest or ckpt/latest there"), std::string::npos) << e;
}

// populate() may drop a file's cached pages and map it again at the same address (to get 2 MB
// pages): the views handed out before stay valid and read the same bytes.
TEST(Safetensors, PopulateKeepsAddressesAndBytes) {
  TempDir d("populate");
  const size_t n = size_t(40) << 20;  // 80 MB of bf16: above the 64 MB where a re-read may happen
  std::vector<uint16_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = uint16_t(i * 2654435761u >> 7);
  SafetensorsWriter sw;
  sw.add("w", DType::BF16, {int64_t(n)}, w.data(), n * 2);
  sw.write(d / "w.safetensors");
  SafetensorsFile f(d / "w.safetensors");
  const uint8_t* before = f.data(*f.find("w"));
  for (bool reread : {false, true}) {
    EXPECT_TRUE(f.populate(reread));
    EXPECT_EQ(f.data(*f.find("w")), before);
    EXPECT_EQ(std::memcmp(before, w.data(), n * 2), 0) << "reread " << reread;
  }
}

// ---------------------------------------------------------------------------------------
// safetensors header validation, rule by rule (as the reference implementation checks):
// each bad file is a one-line error naming the file and the tensor or field; the good
// variants next to each rule still load.

namespace {

// 8-byte little-endian header length, the header, then `data_bytes` zero bytes.
std::string st_bytes(const std::string& header, size_t data_bytes, uint64_t claimed_len = ~uint64_t(0)) {
  std::string s(8, '\0');
  const uint64_t n = claimed_len == ~uint64_t(0) ? header.size() : claimed_len;
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(n >> (8 * i)));
  return s + header + std::string(data_bytes, '\0');
}

struct StCase {
  TempDir dir{"st"};
  std::string path = dir / "t.safetensors";
  // The error opening `bytes` ("" when it opens), checked to be one line naming the file.
  std::string error(const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    std::string e = error_of([&] { SafetensorsFile f(path); });
    if (!e.empty()) {
      EXPECT_NE(e.find(path), std::string::npos) << e;
      EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
    return e;
  }
  void expect_error(const std::string& bytes, const std::string& needle) {
    const std::string e = error(bytes);
    EXPECT_NE(e.find(needle), std::string::npos) << "wanted '" << needle << "', got: " << e;
  }
};

std::string f32(const std::string& shape, uint64_t b, uint64_t e) {
  return "{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
}

}  // namespace

TEST(Safetensors, DuplicateNamesAreErrors) {
  StCase c;
  EXPECT_EQ(c.error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + ",\"b\":" + f32("[1]", 4, 8) + "}", 8)), "");
  // The same entry twice: a JSON parser that keeps the last would accept it.
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + ",\"a\":" + f32("[1]", 0, 4) + "}", 4), "tensor 'a' appears twice");
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + ",\"b\":" + f32("[1]", 4, 8) + ",\"a\":" + f32("[1]", 4, 8) + "}", 8),
                 "tensor 'a' appears twice");
  c.expect_error(st_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
                 "key 'dtype' appears twice in 'a'");
  c.expect_error(st_bytes(R"({"__metadata__":{"k":"x","k":"y"},"a":)" + f32("[1]", 0, 4) + "}", 4),
                 "key 'k' appears twice in '__metadata__'");
  c.expect_error(st_bytes(R"({"__metadata__":{},"__metadata__":{},"a":)" + f32("[1]", 0, 4) + "}", 4),
                 "'__metadata__' appears twice");
}

TEST(Safetensors, OffsetsTileTheDataSectionExactly) {
  StCase c;
  const std::string ab = "{\"a\":" + f32("[2]", 0, 8) + ",\"b\":" + f32("[1]", 8, 12) + "}";
  EXPECT_EQ(c.error(st_bytes(ab, 12)), "");
  // Empty tensors take no bytes, anywhere in the order.
  EXPECT_EQ(c.error(st_bytes("{\"z\":" + f32("[0]", 0, 0) + ",\"a\":" + f32("[1]", 0, 4) + ",\"y\":" +
                             f32("[2, 0]", 4, 4) + "}", 4)), "");
  EXPECT_EQ(c.error(st_bytes("{}", 0)), "");  // no tensors, no data
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 4, 8) + "}", 8), "'a' starts at byte 4, expected 0 (a gap of 4 bytes");
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + ",\"b\":" + f32("[1]", 8, 12) + "}", 12), "'b' starts at byte 8");
  c.expect_error(st_bytes("{\"a\":" + f32("[2]", 0, 8) + ",\"b\":" + f32("[1]", 4, 8) + "}", 8), "overlaps tensor 'a'");
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + ",\"b\":" + f32("[1]", 0, 4) + "}", 4), "overlaps tensor");
  c.expect_error(st_bytes(ab, 8), "tensor 'b': data_offsets end 12 is past the data section (8 bytes)");
  c.expect_error(st_bytes(ab, 16), "4 bytes after the last tensor 'b'");
  c.expect_error(st_bytes("{}", 4), "4 bytes after the last tensor");
  c.expect_error(st_bytes("{\"a\":" + f32("[0]", 4, 0) + "}", 4), "tensor 'a': data_offsets begin 4 > end 0");
  c.expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "tensor 'a': field data_offsets");
  c.expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4), "field data_offsets");
}

TEST(Safetensors, ByteLengthIsDtypeSizeTimesElements) {
  StCase c;
  EXPECT_EQ(c.error(st_bytes(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}})", 12)), "");
  c.expect_error(st_bytes(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,24]}})", 24),
                 "tensor 'a': data_offsets span 24 bytes but shape [2, 3] of BF16 needs 12");
  c.expect_error(st_bytes("{\"a\":" + f32("[3]", 0, 8) + "}", 8), "needs 12");
  c.expect_error(st_bytes(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1), "tensor 'a': unsupported dtype 'Q4'");
}

// A rejected file must not keep its mapping: the constructor throws, so no destructor runs.
// (Leaked, the mappings of ~65k bad files exhausted vm.max_map_count: found by fuzzing.)
TEST(Safetensors, RejectedFilesAreUnmapped) {
  auto mappings = [] {
    std::ifstream maps("/proc/self/maps");
    size_t n = 0;
    for (std::string line; std::getline(maps, line);) ++n;
    return n;
  };
  StCase c;
  const std::string bad = st_bytes("{\"a\":" + f32("[1]", 4, 8) + "}", 8);  // a gap: rejected after mapping
  c.expect_error(bad, "a gap of 4 bytes");
  const size_t before = mappings();
  for (int i = 0; i < 200; ++i) c.error(bad);
  EXPECT_LT(mappings(), before + 50) << "each rejected file left a mapping behind";
}

TEST(Safetensors, HeaderLengthIsBoundedByTheFile) {
  StCase c;
  const std::string h = "{\"a\":" + f32("[1]", 0, 4) + "}";
  EXPECT_EQ(c.error(st_bytes(h + "    ", 4)), "");  // trailing spaces pad the header, as writers align
  c.expect_error(st_bytes(h, 4, h.size() + 5), "truncated: header length");
  c.expect_error(st_bytes(h, 0, uint64_t(1) << 40), "exceeds the 100 MB limit");
  c.expect_error(st_bytes("", 0, ~uint64_t(0) - 1), "exceeds the 100 MB limit");  // 8 + n would wrap
  c.expect_error(std::string(5, '\0'), "truncated");
  c.expect_error(st_bytes("", 0), "does not start with '{'");
}

TEST(Safetensors, HeaderIsAnObjectOfObjectsWithStringMetadata) {
  StCase c;
  EXPECT_EQ(c.error(st_bytes(R"({"__metadata__":{"format":"pt"},"a":)" + f32("[1]", 0, 4) + "}", 4)), "");
  c.expect_error(st_bytes("[1,2]", 0), "does not start with '{'");
  c.expect_error(st_bytes("{\"a\":", 0), "header: not valid JSON");
  c.expect_error(st_bytes("{\"a\":" + f32("[1]", 0, 4) + "} x", 4), "not valid JSON");
  c.expect_error(st_bytes(R"({"a":5})", 0), "tensor 'a': is not an object");
  c.expect_error(st_bytes(R"({"a":[0,4]})", 4), "tensor 'a': is not an object");
  c.expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "tensor 'a': field data_offsets is missing");
  c.expect_error(st_bytes(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", 4), "tensor 'a': field dtype");
  c.expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4), "tensor 'a': field shape");
  c.expect_error(st_bytes(R"({"__metadata__":{"format":1},"a":)" + f32("[1]", 0, 4) + "}", 4),
                 "__metadata__ value of 'format' is not a string");
  c.expect_error(st_bytes(R"({"__metadata__":{"n":{"x":"y"}}})", 0), "__metadata__ value of 'n' is not a string");
  c.expect_error(st_bytes(R"({"__metadata__":["pt"]})", 0), "__metadata__ is not an object");
  // A name with a line break is printed escaped: the error stays one line.
  c.expect_error(st_bytes("{\"a\\nb\":5}", 0), "tensor 'a\\x0ab'");
}

TEST(Safetensors, ShapesAreNonNegativeWithoutOverflow) {
  StCase c;
  c.expect_error(st_bytes("{\"a\":" + f32("[-1]", 0, 0) + "}", 0), "tensor 'a': shape entry -1 is not a non-negative");
  c.expect_error(st_bytes("{\"a\":" + f32("[1.5]", 0, 4) + "}", 4), "shape entry 1.5");
  c.expect_error(st_bytes("{\"a\":" + f32("[\"2\"]", 0, 8) + "}", 8), "shape entry \"2\"");
  // 2^32 x 2^32 elements wrap a 64-bit count to 0: an error, not an empty tensor.
  c.expect_error(st_bytes("{\"a\":" + f32("[4294967296, 4294967296]", 0, 0) + "}", 0),
                 "tensor 'a': shape [4294967296,4294967296] has more elements than 64 bits count");
  c.expect_error(st_bytes("{\"a\":" + f32("[9223372036854775808]", 0, 0) + "}", 0), "more elements than 64 bits");
  // 2^62 F32 elements fit the count but not the byte length (2^64 wraps to 0).
  c.expect_error(st_bytes("{\"a\":" + f32("[4611686018427387904]", 0, 0) + "}", 0), "more than 2^64 bytes");
  // A zero dimension makes any product empty, as in the reference.
  EXPECT_EQ(c.error(st_bytes("{\"a\":" + f32("[0, 4294967296, 4294967296]", 0, 0) + "}", 0)), "");
}

// Everything the project's writers produce loads: SafetensorsWriter (checkpoints, HF export,
// dev cases) with metadata, empty tensors and every dtype it encodes.
TEST(Safetensors, WriterOutputLoads) {
  TempDir d("writer");
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  std::vector<float> x = iota_f(7, 1.f);
  w.add_float("x", DType::F32, {7}, x.data());
  w.add_float("e", DType::F32, {0, 3}, x.data());
  w.add_float("h", DType::BF16, {7}, x.data());
  std::vector<double> y(3, 0.25);
  w.add_double("y", DType::F64, {3}, y.data());
  int8_t b[3] = {1, 2, 3};
  w.add("b", DType::I8, {3}, b, 3);
  w.write(d / "w.safetensors");
  SafetensorsFile f(d / "w.safetensors");
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  std::vector<float> got(7);
  f.read("h", got.data(), {7});
  EXPECT_EQ(got, x);
}
