// Every crash the fuzz targets found and we fixed (tests/fuzz/corpus/<target>/regress-*), as
// a unit test: the seed goes through the parser the target calls, natively (no sanitizer
// build needed), and must fail with the error of the check that fixed it, as
// tests/fuzz/regress.tsv names it. One test per seed (FuzzRegress/Seed.*/<target>_<seed>);
// a seed without a line in regress.tsv fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "data/hf_tokenizer.h"
#include "model/config.h"
#include "size/hardware.h"
#include "size/measured.h"
#include "test_util.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

const std::string kFuzz = std::string(ZAYA_SOURCE_DIR) + "/tests/fuzz";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void put(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// The input cut where the fuzz targets cut it (tests/fuzz/fuzz_util.h).
std::vector<std::string> parts(const std::string& s, size_t max_parts) {
  std::vector<std::string> out;
  size_t at = 0;
  while (out.size() + 1 < max_parts) {
    const size_t cut = s.find("\n====\n", at);
    if (cut == std::string::npos) break;
    out.push_back(s.substr(at, cut - at));
    at = cut + 6;
  }
  out.push_back(s.substr(at));
  return out;
}

// What each target does with its input (tests/fuzz/fuzz_<target>.cpp), up to the first error.
using Harness = std::function<void(const std::string& input, const test_util::TempDir& dir)>;
const std::map<std::string, Harness>& harnesses() {
  static const std::map<std::string, Harness> h = {
      {"tokenizer",
       [](const std::string& in, const test_util::TempDir&) {
         const auto p = parts(in, 3);
         auto t = HfTokenizer::from_json("tokenizer.json", p[0], p.size() > 1 ? p[1] : "");
         (void)t->decode(t->encode(p.size() > 2 ? p[2] : "Hello world"));
       }},
      {"hf_index",
       [](const std::string& in, const test_util::TempDir& d) {
         put(d / "model.safetensors.index.json", in);
         (void)hf_shard_list(d.str());
       }},
      {"hf_config",
       [](const std::string& in, const test_util::TempDir&) {
         (void)model_config_from_hf_json(nlohmann::json::parse(in), "config.json");
       }},
      {"model_toml", [](const std::string& in, const test_util::TempDir&) { (void)parse_model_config_toml(in, "model.toml"); }},
      {"safetensors",
       [](const std::string& in, const test_util::TempDir& d) {
         put(d / "model.safetensors", in);
         SafetensorsFile f(d / "model.safetensors");
       }},
      {"ckpt_manifest",
       [](const std::string& in, const test_util::TempDir& d) {
         const auto p = parts(in, 2);  // the manifest, and the bytes of the data file it names
         put(d / "manifest.json", p[0]);
         put(d / "params.safetensors", p.size() > 1 ? p[1] : std::string(256, '\0'));
         put(d / "tokenizer.json", "{}");
         Checkpoint ck(d.str());
         (void)ck.step();
         (void)checkpoint_model_config(ck);
       }},
      {"nccl",
       [](const std::string& in, const test_util::TempDir&) {  // the first byte picks the file name
         static const char* kNames[] = {"nccl.txt", "all_reduce_perf.txt", "reduce_scatter_perf.log", "all_gather.out",
                                        "alltoall_perf.txt", "broadcast_perf.txt", "sendrecv.txt", "reduce_perf.txt"};
         const std::string path = kNames[uint8_t(in[0]) % 8];
         const size::NcclTestsRun run = size::parse_nccl_tests_output(in.substr(1), path);
         size::HardwareProfile hw;
         size::apply_network_measurements(hw, run.rows, path);
       }},
      {"hardware", [](const std::string& in, const test_util::TempDir&) { (void)size::parse_hardware_profile(in, "hw.toml"); }},
      {"bench_profile",
       [](const std::string& in, const test_util::TempDir& d) {
         static const char* kFiles[] = {"gemm.csv", "mem.csv", "peak.json", "comm.csv", "elementwise.json", "nccl.txt"};
         const auto p = parts(in, 6);
         for (size_t i = 0; i < p.size(); ++i)
           if (p[i] != "-") put(d / kFiles[i], p[i]);
         (void)size::profile_from_bench_dir(d.str());
       }},
  };
  return h;
}

struct Seed {
  std::string target, file, want;  // want: the check's error text ("" when regress.tsv lacks it)
};

std::vector<Seed> seeds() {
  std::map<std::string, std::string> want;
  std::ifstream tsv(kFuzz + "/regress.tsv");
  for (std::string line; std::getline(tsv, line);) {
    const size_t tab = line.find('\t');
    if (!line.empty() && line[0] != '#' && tab != std::string::npos) want[line.substr(0, tab)] = line.substr(tab + 1);
  }
  std::vector<Seed> out;
  for (const auto& t : fs::directory_iterator(kFuzz + "/corpus"))
    for (const auto& f : fs::directory_iterator(t.path()))
      if (f.path().filename().string().starts_with("regress-")) {
        const std::string key = t.path().filename().string() + "/" + f.path().filename().string();
        out.push_back({t.path().filename().string(), f.path().string(), want.count(key) ? want[key] : ""});
      }
  std::sort(out.begin(), out.end(), [](const Seed& a, const Seed& b) { return a.file < b.file; });
  return out;
}

void PrintTo(const Seed& s, std::ostream* os) { *os << s.target << "/" << fs::path(s.file).filename().string(); }

class Seeds : public ::testing::TestWithParam<Seed> {};

}  // namespace

TEST_P(Seeds, FailsAtTheCheckThatFixedIt) {
  const Seed& s = GetParam();
  ASSERT_FALSE(s.want.empty()) << s.file << ": no line in tests/fuzz/regress.tsv names the check it must reach";
  const auto h = harnesses().find(s.target);
  ASSERT_NE(h, harnesses().end()) << "no harness for fuzz target " << s.target << " in test_fuzz_regress.cpp";
  const test_util::TempDir dir("FuzzRegress", s.target);
  const std::string input = slurp(s.file);
  ASSERT_FALSE(input.empty()) << s.file;
  const std::string err = test_util::error_of([&] { h->second(input, dir); });
  EXPECT_NE(err.find(s.want), std::string::npos) << s.file << "\n  error: " << (err.empty() ? "(none)" : err)
                                                 << "\n  expected it to contain: " << s.want;
}

INSTANTIATE_TEST_SUITE_P(FuzzRegress, Seeds, ::testing::ValuesIn(seeds()), [](const auto& info) {
  std::string n = info.param.target + "_" + fs::path(info.param.file).filename().string();
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// The table and the corpus agree, and no target lost its regress seeds unnoticed.
TEST(FuzzRegress, EveryLineOfTheTableNamesASeed) {
  std::ifstream tsv(kFuzz + "/regress.tsv");
  int lines = 0;
  for (std::string line; std::getline(tsv, line);) {
    if (line.empty() || line[0] == '#') continue;
    ++lines;
    const std::string key = line.substr(0, line.find('\t'));
    EXPECT_TRUE(fs::exists(kFuzz + "/corpus/" + key)) << "regress.tsv names " << key << ", which is not in the corpus";
  }
  EXPECT_EQ(size_t(lines), seeds().size());
  EXPECT_GE(lines, 15);
}
