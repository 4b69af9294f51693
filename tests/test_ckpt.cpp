// Checkpoints: manifest round trip with sliced tensors, checksum and missing-file errors,
// atomic publication (no partial directory visible, `latest` only ever names complete
// checkpoints), keep-last-K retention, path resolution.
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
