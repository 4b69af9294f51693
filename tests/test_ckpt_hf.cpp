// Checkpoint <-> HF conversion (`zaya ckpt export-hf / import-hf / diff`): a trainer-style
// checkpoint with tensors sliced across rank files exports and imports back to identical
// logits; bf16 export rounds within bf16 precision; every bad input (a tensor named twice in
// a header, an index naming a missing shard or tensor) is a one-line error that leaves
// nothing at the destination; the CLI prints and exits as documented and takes the `latest`
// pointer file wherever a checkpoint is named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/hf_convert.h"
#include "ckpt/hf_mmap.h"
#include "core/error.h"
#include "check_util.h"
#include "test_util.h"

using namespace zaya;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  explicit TempDir(const std::string& tag) : test_util::TempDir("ckpt_hf", tag) {}
};

using test_util::error_of;

ModelConfig hf_tiny() {
  ModelConfig c = load_model_config_toml(ZAYA_SOURCE_DIR "/configs/zaya1-tiny.toml");
  c.num_attention_heads = 8;  // the HF code needs Hq = nominal heads / 2
  c.head_dim = 8;
  return c;
}

// As the trainer saves a 2-rank ZeRO-1 run: the flat parameter array cut in two at a point
// inside a tensor, each half in its rank's file, optimizer moments alongside, buffers apart.
std::string save_trainer_like(const std::string& root, const Model<float>& m, bool tokenizer) {
  const size_t cut = m.params.size() / 2 + 3;
  CheckpointWriter w(root, 7);
  std::vector<float> moments(m.params.size(), 0.5f);
  for (const ParamInfo& p : m.layout.params.params) {
    for (int r = 0; r < 2; ++r) {
      const size_t lo = r ? cut : 0, hi = r ? m.params.size() : cut;
      const size_t b = std::max(p.offset, lo), e = std::min(p.offset + p.numel, hi);
      if (b >= e) continue;
      const std::string f = r ? "params-r00001.safetensors" : "params-r00000.safetensors";
      w.add_f32(f, "param/" + p.name, p.shape, b - p.offset, e - b, m.params.data() + b);
      w.add_f32(r ? "optim-r00001.safetensors" : "optim-r00000.safetensors", "optim.m/" + p.name, p.shape,
                b - p.offset, e - b, moments.data() + b);
    }
  }
  for (const ParamInfo& p : m.layout.buffers.params)
    w.add_f32("buffers.safetensors", "buffer/" + p.name, p.shape, 0, p.numel, m.buffers.data() + p.offset);
  const std::string tok = root + ".tokenizer.model";
  if (tokenizer) {
    std::ofstream(tok) << "not really sentencepiece";
    w.copy_file(tok, "tokenizer.model");
  }
  nlohmann::json header = {
      {"tokens", 1234},
      {"model_config", {{"toml", m.cfg().to_toml()}, {"hf", m.cfg().to_hf_json()}}},
      {"tokenizer", tokenizer ? "tokenizer.model" : ""},
      {"state", {{"trainer", {{"step", 7}, {"rope_theta", m.cfg().rope_theta}}}, {"optimizer", {{"kind", "adamw"}}}}}};
  return w.commit(header, {w.write_files()});
}

std::vector<float> logits_of(Model<float>& m) {
  std::vector<int32_t> ids = {1, 5, 9, 33, 2, 7, 7, 80};
  m.forward(ids.data(), nullptr, 1, 8);
  return std::vector<float>(m.logits(), m.logits() + 8 * size_t(m.cfg().vocab_size));
}

// Runs the CLI; returns {exit status, stdout+stderr}.
std::pair<int, std::string> zaya_cli(const std::string& args) {
  FILE* p = popen((std::string(ZAYA_BIN) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {pclose(p), out};
}

}  // namespace

TEST(CkptHf, ExportImportRoundTripGivesIdenticalLogits) {
  TempDir t("roundtrip");
  Model<float> a(hf_tiny());
  randomize_for_checks(a.layout, 11, a.params.data(), a.buffers.data());
  const std::string ck = save_trainer_like(t / "ckpt", a, true);
  ExportHfOptions o;
  o.dtype = DType::F32;
  o.max_shard_bytes = 30000;  // several shards + index
  const ConvertSummary s = export_hf(t / "ckpt", t / "hf", o);
  EXPECT_GT(s.files, 2u);
  EXPECT_EQ(s.step, 7);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors.index.json", "tokenizer.model"})
    EXPECT_TRUE(fs::exists(t / ("hf/" + std::string(f)))) << f;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(t / "hf/config.json"))["torch_dtype"], "float32");
  // Nothing left next to the destination.
  for (auto& e : fs::directory_iterator(t.path)) EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u);

  Model<float> b(load_model_config(t / "hf"));
  load_hf_weights(t / "hf", b);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.buffers, b.buffers);

  import_hf(t / "hf", t / "imported", false);
  Checkpoint ic(t / "imported");
  EXPECT_TRUE(fs::exists(t / "imported/tokenizer.model"));
  EXPECT_FALSE(ic.state().contains("optimizer"));
  EXPECT_FALSE(ic.state().contains("loader"));
  Model<float> c(checkpoint_model_config(ic));
  load_checkpoint_model(ic, c);
  EXPECT_EQ(a.params, c.params);
  EXPECT_EQ(a.buffers, c.buffers);
  const auto la = logits_of(a), lc = logits_of(c);
  for (size_t i = 0; i < la.size(); ++i) ASSERT_EQ(la[i], lc[i]) << i;

  // diff: the checkpoint and its f32 export are identical (optimizer tensors skipped).
  DiffResult d = diff_weights(ck, t / "hf");
  EXPECT_EQ(d.tensors.size(), a.layout.params.params.size() + a.layout.buffers.params.size());
  EXPECT_GT(d.skipped_a, 0u);
  for (auto& x : d.tensors) EXPECT_TRUE(x.status.empty() && x.max_abs == 0) << x.name << " " << x.status;

  // bf16: one file, rounding within bf16's relative precision, biases exact (kept f32);
  // importing it back loses nothing more.
  o.dtype = DType::BF16;
  o.max_shard_bytes = 0;
  export_hf(ck, t / "hf16", o);
  EXPECT_TRUE(fs::exists(t / "hf16/model.safetensors"));
  EXPECT_FALSE(fs::exists(t / "hf16/model.safetensors.index.json"));
  d = diff_weights(t / "hf", t / "hf16");
  double worst = 0;
  for (auto& x : d.tensors) {
    ASSERT_TRUE(x.status.empty()) << x.name;
    worst = test_util::max_err(worst, x.max_rel);
    if (x.name.find("balancing_biases") != std::string::npos) {
      EXPECT_EQ(x.max_abs, 0) << x.name;
    }
  }
  EXPECT_GT(worst, 0);
  EXPECT_LE(worst, 1.0 / 256);
  import_hf(t / "hf16", t / "imported16", false);
  d = diff_weights(t / "hf16", t / "imported16");
  for (auto& x : d.tensors) EXPECT_TRUE(x.status.empty() && x.max_abs == 0) << x.name;
  Model<float> e(load_model_config(t / "hf16")), f(load_model_config(t / "hf16"));
  load_hf_weights(t / "hf16", e);
  Checkpoint ic16(t / "imported16");
  load_checkpoint_model(ic16, f);
  const auto le = logits_of(e), lf = logits_of(f);
  for (size_t i = 0; i < le.size(); ++i) ASSERT_EQ(le[i], lf[i]) << i;

  // A modified tensor shows up in diff by name.
  Model<float> g(hf_tiny());
  g.params = a.params;
  g.buffers = a.buffers;
  g.params[a.layout.params.params.back().offset] += 0.5f;
  save_trainer_like(t / "ckpt2", g, false);
  d = diff_weights(ck, t / "ckpt2");
  size_t differ = 0;
  for (auto& x : d.tensors)
    if (x.max_abs > 0) {
      ++differ;
      EXPECT_NEAR(x.max_abs, 0.5, 1e-6) << x.name;
    }
  EXPECT_EQ(differ, 1u);
}

TEST(CkptHf, BadInputsAreOneLineErrorsAndWriteNothing) {
  TempDir t("bad");
  Model<float> a(hf_tiny());
  randomize_for_checks(a.layout, 5, a.params.data(), a.buffers.data());
  const std::string ck = save_trainer_like(t / "ckpt", a, false);
  ExportHfOptions o;
  auto nothing_at = [&](const std::string& out) {
    EXPECT_FALSE(fs::exists(out)) << out;
    for (auto& e : fs::directory_iterator(t.path)) EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u);
  };
  auto one_line = [](const std::string& msg, const std::string& needle) {
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  };

  // A non-empty destination is refused unless --force; its contents stay.
  fs::create_directories(t / "full");
  std::ofstream(t / "full/keep.txt") << "x";
  one_line(error_of([&] { export_hf(ck, t / "full", o); }), "not empty");
  EXPECT_TRUE(fs::exists(t / "full/keep.txt"));
  o.force = true;
  export_hf(ck, t / "full", o);
  EXPECT_FALSE(fs::exists(t / "full/keep.txt"));
  EXPECT_TRUE(fs::exists(t / "full/config.json"));
  o.force = false;

  // Checksum mismatch: flip a byte inside a tensor of params-r00001.
  const std::string p1 = ck + "/params-r00001.safetensors";
  {
    std::fstream f(p1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  one_line(error_of([&] { export_hf(ck, t / "out1", o); }), "checksum mismatch in file params-r00001.safetensors");
  nothing_at(t / "out1");
  one_line(error_of([&] { Checkpoint(ck).verify(); }), "params-r00001.safetensors");
  one_line(error_of([&] { diff_weights(ck, t / "full"); }), "checksum mismatch");
  // Truncated shard.
  fs::resize_file(p1, fs::file_size(p1) - 100);
  one_line(error_of([&] { export_hf(ck, t / "out2", o); }), "params-r00001.safetensors");
  nothing_at(t / "out2");
  // Manifest naming a missing file.
  fs::remove(p1);
  one_line(error_of([&] { export_hf(ck, t / "out3", o); }), "file params-r00001.safetensors");
  nothing_at(t / "out3");

  // HF directory with a missing tensor, then a misshapen one.
  ExportHfOptions o32;
  o32.dtype = DType::F32;
  Model<float> b(hf_tiny());
  save_hf_dir(t / "hfbad", b, DType::F32);
  const ParamInfo& victim = a.layout.params.params[3];
  {
    SafetensorsFile src(t / "hfbad/model.safetensors");
    SafetensorsWriter w;
    for (const TensorEntry& e : src.tensors())
      if (e.name != victim.name) w.add(e.name, e.dtype, e.shape, src.data(e), e.end - e.begin);
    w.write(t / "hfbad/model.tmp");
  }
  fs::rename(t / "hfbad/model.tmp", t / "hfbad/model.safetensors");
  one_line(error_of([&] { import_hf(t / "hfbad", t / "out4", false); }), "missing tensor '" + victim.name + "'");
  one_line(error_of([&] { verify_hf_dir(t / "hfbad"); }), "missing tensor '" + victim.name + "'");
  nothing_at(t / "out4");
  EXPECT_EQ(error_of([&] { diff_weights(t / "hfbad", t / "full"); }), "");  // a difference, not an error
  {
    SafetensorsWriter w;
    std::vector<float> z(victim.numel + 1, 0.f);
    w.add_float(victim.name, DType::F32, {int64_t(victim.numel + 1)}, z.data());
    SafetensorsFile src(t / "hfbad/model.safetensors");
    for (const TensorEntry& e : src.tensors()) w.add(e.name, e.dtype, e.shape, src.data(e), e.end - e.begin);
    w.write(t / "hfbad/model.tmp");
  }
  fs::rename(t / "hfbad/model.tmp", t / "hfbad/model.safetensors");
  one_line(error_of([&] { import_hf(t / "hfbad", t / "out5", false); }), "tensor '" + victim.name + "' has shape");
  nothing_at(t / "out5");
  const DiffResult d = diff_weights(t / "hfbad", t / "full");
  size_t shape_differs = 0;
  for (auto& x : d.tensors) shape_differs += x.status == "shape differs";
  EXPECT_EQ(shape_differs, 1u);
  // A truncated HF shard.
  fs::resize_file(t / "hfbad/model.safetensors", 100);
  one_line(error_of([&] { import_hf(t / "hfbad", t / "out6", false); }), "model.safetensors");
  nothing_at(t / "out6");
}

TEST(CkptHf, CliConvertsInspectsDiffsAndScores) {
  TempDir t("cli");
  Model<float> a(hf_tiny());
  randomize_for_checks(a.layout, 3, a.params.data(), a.buffers.data());
  save_trainer_like(t / "run", a, false);
  auto [rc, out] = zaya_cli("ckpt export-hf " + t / "run" + " " + t / "hf --dtype fp32 --max-shard-size 40KB");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("exported step 7"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt import-hf " + t / "hf" + " " + t / "imp");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("--init-from"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt verify " + t / "imp");
  EXPECT_EQ(rc, 0) << out;
  std::tie(rc, out) = zaya_cli("ckpt inspect " + t / "run");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("params-r00001.safetensors"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt inspect " + t / "hf");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model-00001-of-"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt diff " + t / "run" + " " + t / "imp --tol 0");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("0 differ"), std::string::npos) << out;
  // Exported and imported directories score alike, straight from either form.
  std::ofstream(t / "ids.txt") << "3 17 42 9 1";
  std::tie(rc, out) = zaya_cli("score --model " + t / "hf" + " --ids " + t / "ids.txt --json");
  ASSERT_EQ(rc, 0) << out;
  auto [rc2, out2] = zaya_cli("score --ckpt " + t / "imp" + " --ids " + t / "ids.txt --json");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_EQ(nlohmann::json::parse(out)["loss"], nlohmann::json::parse(out2)["loss"]);
  // A bf16 export (the default) scores through the in-place bf16 path, close to the fp32 one.
  std::tie(rc, out2) = zaya_cli("ckpt export-hf " + t / "run" + " " + t / "hf16");
  ASSERT_EQ(rc, 0) << out2;
  std::tie(rc, out2) = zaya_cli("score --model " + t / "hf16" + " --ids " + t / "ids.txt --json");
  ASSERT_EQ(rc, 0) << out2;
  EXPECT_NEAR(nlohmann::json::parse(out)["loss"].get<double>(), nlohmann::json::parse(out2)["loss"].get<double>(), 0.05);
  // Errors: one line, non-zero exit, nothing written.
  std::tie(rc, out) = zaya_cli("ckpt export-hf " + t / "nowhere" + " " + t / "x");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("zaya: error: checkpoint"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(t / "x"));
  std::tie(rc, out) = zaya_cli("ckpt export-hf " + t / "run" + " " + t / "hf");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not empty"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt verify " + t / "hf");
  EXPECT_EQ(rc, 0) << out;
  {  // a flipped byte: verify names the file, export writes nothing
    std::fstream f(t / "imp/params-r00000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x55');
  }
  std::tie(rc, out) = zaya_cli("ckpt verify " + t / "imp");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("checksum mismatch in file params-r00000.safetensors"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt export-hf " + t / "imp" + " " + t / "x");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("checksum mismatch"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(t / "x"));
  std::tie(rc, out) = zaya_cli("ckpt diff " + t / "run" + " " + t / "nowhere");
  EXPECT_NE(rc, 0) << out;
  // --tol exceeded: the table still prints, then a non-zero exit.
  Model<float> g(hf_tiny());
  g.params = a.params;
  g.buffers = a.buffers;
  g.params[0] += 0.25f;
  save_trainer_like(t / "run2", g, false);
  std::tie(rc, out) = zaya_cli("ckpt diff " + t / "run" + " " + t / "run2");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("1 differ"), std::string::npos) << out;
  std::tie(rc, out) = zaya_cli("ckpt diff " + t / "run" + " " + t / "run2 --tol 0.1");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("exceed"), std::string::npos) << out;
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Rewrites a safetensors file with its first tensor's header entry written twice (same
// offsets): a parser that keeps the last duplicate would read the file as before.
std::string duplicate_first_entry(const std::string& path) {
  const std::string bytes = read_all(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  auto it = h.begin();
  if (it.key() == "__metadata__") ++it;
  const std::string name = it.key();
  std::string header = "{" + nlohmann::json(name).dump() + ":" + it.value().dump() + "," + bytes.substr(9, n - 1);
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[size_t(i)] = char(uint8_t(uint64_t(header.size()) >> (8 * i)));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << len << header << bytes.substr(8 + n);
  return name;
}

}  // namespace

// A tensor named twice in a header fails every reader (library and CLI) with one line naming
// the file and the tensor, and a non-zero exit: it was read and scored before.
// A NaN or infinity on either side is a difference, also the same NaN on both sides (two runs
// that diverged alike are not equal); --nan-equal opts in to NaN == NaN, never NaN == number.
TEST(CkptHf, DiffCountsNaNAndInfinityAsDifferences) {
  TempDir t("diffnan");
  Model<float> a(hf_tiny());
  randomize_for_checks(a.layout, 3, a.params.data(), a.buffers.data());
  const std::string clean = t / "clean";
  save_trainer_like(clean, a, false);
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < 3; ++k) {
    Model<float> g(hf_tiny());
    g.params = a.params;
    g.buffers = a.buffers;
    g.params[5] = g.params[9] = bad[k];
    const std::string dir = t / ("bad" + std::to_string(k));
    save_trainer_like(dir, g, false);
    const std::pair<std::string, std::string> pairs[3] = {{clean, dir}, {dir, clean}, {dir, dir}};
    for (const auto& [x, y] : pairs) {
      for (const bool nan_equal : {false, true}) {
        const DiffResult d = diff_weights(x, y, nan_equal);
        size_t flagged = 0, nonfinite = 0;
        for (const auto& e : d.tensors) {
          flagged += e.max_abs == INFINITY && e.max_rel == INFINITY;
          nonfinite += e.nonfinite_a + e.nonfinite_b;
          if (e.max_abs != INFINITY) {
            EXPECT_EQ(e.max_abs, 0) << e.name;
          }
        }
        const bool same = x == y;
        EXPECT_EQ(flagged, nan_equal && same ? 0u : 1u) << "value " << bad[k] << " nan_equal " << nan_equal;
        EXPECT_EQ(nonfinite, same ? 4u : 2u) << "value " << bad[k];
      }
    }
    auto [rc, out] = zaya_cli("ckpt diff " + dir + " " + dir + " --tol 0");
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("1 hold NaN or infinite values"), std::string::npos) << out;
    EXPECT_NE(out.find("NaN/inf: 2 in A, 2 in B"), std::string::npos) << out;
    std::tie(rc, out) = zaya_cli("ckpt diff " + dir + " " + dir + " --tol 0 --nan-equal");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("0 differ"), std::string::npos) << out;
    std::tie(rc, out) = zaya_cli("ckpt diff " + clean + " " + dir + " --rtol 1e30 --nan-equal");
    EXPECT_NE(rc, 0) << out;
  }
}

TEST(CkptHf, DuplicateTensorNameIsAnError) {
  TempDir t("dup");
  Model<float> m(hf_tiny());
  randomize_for_checks(m.layout, 2, m.params.data(), m.buffers.data());
  save_hf_dir(t / "hf", m, DType::F32);
  std::ofstream(t / "ids.txt") << "3 17 42 9 1";
  auto [rc, out] = zaya_cli("score --model " + t / "hf" + " --ids " + t / "ids.txt");
  ASSERT_EQ(rc, 0) << out;  // the control: the intact directory scores
  const std::string name = duplicate_first_entry(t / "hf/model.safetensors");
  const std::string file = t / "hf/model.safetensors";
  const std::string needle = file + ": header: tensor '" + name + "' appears twice";
  for (const char* cmd : {"score --model DIR --ids IDS", "ckpt verify DIR", "ckpt inspect DIR",
                          "generate --ckpt DIR --prompt x --tokenizer IDS"}) {
    std::string c = cmd;
    c.replace(c.find("DIR"), 3, t / "hf");
    if (c.find("IDS") != std::string::npos) c.replace(c.find("IDS"), 3, t / "ids.txt");
    std::tie(rc, out) = zaya_cli(c);
    EXPECT_NE(rc, 0) << c << "\n" << out;
    EXPECT_NE(out.find(needle), std::string::npos) << c << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << c << "\n" << out;
  }
  Model<float> back(hf_tiny());
  EXPECT_NE(error_of([&] { load_hf_weights(t / "hf", back); }).find(needle), std::string::npos);
}

// model.safetensors.index.json: a weight_map naming a missing shard, a tensor its shard
// lacks, a tensor twice, or nothing at all is an error naming the index or shard and the
// tensor, from every reader (fp32 load, in-place bf16 load, verify).
TEST(CkptHf, IndexNamingMissingFilesOrTensorsIsAnError) {
  TempDir t("index");
  Model<float> m(hf_tiny());
  randomize_for_checks(m.layout, 2, m.params.data(), m.buffers.data());
  save_hf_dir(t / "hf", m, DType::BF16, 40 << 10);
  const std::string index_path = t / "hf/model.safetensors.index.json";
  const std::string good = read_all(index_path);
  const nlohmann::json index = nlohmann::json::parse(good);
  ASSERT_GT(index["weight_map"].size(), 2u);
  const std::string victim = index["weight_map"].begin().key();
  const std::string shard = index["weight_map"][victim];
  std::string other_shard;
  for (auto& [k, v] : index["weight_map"].items())
    if (v != shard) other_shard = v;
  ASSERT_FALSE(other_shard.empty());
  // Every reader fails with `needle`, in one line.
  auto all_fail = [&](const std::string& text, const std::string& needle) {
    std::ofstream(index_path, std::ios::trunc) << text;
    Model<float> back(hf_tiny());
    for (const std::string& e : {error_of([&] { load_hf_weights(t / "hf", back); }),
                                 error_of([&] { open_hf_weights(t / "hf"); }),
                                 error_of([&] { verify_hf_dir(t / "hf"); })}) {
      EXPECT_NE(e.find(needle), std::string::npos) << "wanted: " << needle << "\ngot: " << e;
      EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
  };
  Model<float> back(hf_tiny());  // the control: the intact index loads in every reader
  EXPECT_EQ(error_of([&] { load_hf_weights(t / "hf", back); }), "");
  EXPECT_EQ(error_of([&] { open_hf_weights(t / "hf"); }), "");
  EXPECT_EQ(error_of([&] { verify_hf_dir(t / "hf"); }), "");
  nlohmann::json j = index;
  j["weight_map"][victim] = "model-00009-of-00009.safetensors";
  all_fail(j.dump(), index_path + ": shard 'model-00009-of-00009.safetensors' (holding '" + victim + "') is missing");
  j = index;
  j["weight_map"]["model.no_such.weight"] = shard;
  all_fail(j.dump(), t / "hf/" + shard + ": the index says it holds 'model.no_such.weight' but it does not");
  j = index;
  j["weight_map"][victim] = other_shard;  // in the directory, but not in that shard
  all_fail(j.dump(), t / "hf/" + other_shard + ": the index says it holds '" + victim + "' but it does not");
  std::string twice = good;
  twice.insert(twice.find('{', twice.find("\"weight_map\"")) + 1,
               "\n    " + nlohmann::json(victim).dump() + ": \"" + shard + "\",");
  all_fail(twice, index_path + ": key '" + victim + "' appears twice in 'weight_map'");
  all_fail(R"({"metadata": {}, "weight_map": {}})", index_path + ": weight_map names no tensor");
  all_fail(R"({"weight_map": {"a": "../x.safetensors"}})", "is not a file in the directory");
  all_fail("{\"weight_map\": ", index_path + ": not valid JSON");
}

// The `latest` pointer file names a checkpoint wherever a checkpoint is named: every
// `zaya ckpt` subcommand, score --ckpt, generate --ckpt.
TEST(CkptHf, CliAcceptsTheLatestPointerFile) {
  TempDir t("latest");
  ModelConfig c = hf_tiny();
  c.vocab_size = 300;  // room for the byte tokenizer's 260 pieces
  Model<float> m(c);
  randomize_for_checks(m.layout, 4, m.params.data(), m.buffers.data());
  save_trainer_like(t / "run/ckpt", m, false);
  const std::string latest = t / "run/ckpt/latest";
  auto ok = [&](const std::string& args) {
    auto [rc, out] = zaya_cli(args);
    EXPECT_EQ(rc, 0) << args << "\n" << out;
    return out;
  };
  EXPECT_NE(ok("ckpt inspect " + latest).find("step        7"), std::string::npos);
  EXPECT_NE(ok("ckpt verify " + latest).find("every checksum matches"), std::string::npos);
  EXPECT_NE(ok("ckpt diff " + latest + " " + t / "run --tol 0").find("0 differ"), std::string::npos);
  ok("ckpt export-hf " + latest + " " + t / "hf --dtype fp32 --no-hf-check");
  EXPECT_NE(ok("ckpt diff " + t / "hf " + latest + " --tol 1e-6").find("0 unmatched"), std::string::npos);
  std::ofstream(t / "ids.txt") << "3 17 42 9 1";
  const std::string via_run = ok("score --ckpt " + t / "run" + " --ids " + t / "ids.txt --json");
  const std::string via_latest = ok("score --ckpt " + latest + " --ids " + t / "ids.txt --json");
  ASSERT_FALSE(via_latest.empty());
  EXPECT_EQ(nlohmann::json::parse(via_run)["loss"], nlohmann::json::parse(via_latest)["loss"]);
  test_util::write_byte_tokenizer(t.str());
  const std::string gen = ok("generate --ckpt " + latest + " --tokenizer " + t / "tokenizer.json" +
                             " --prompt hi --temperature 0 --max-tokens 3");
  EXPECT_EQ(gen.rfind("hi", 0), 0u) << gen;
  // A pointer to a step that is gone: one line naming the pointer, non-zero exit.
  std::ofstream(t / "run/ckpt/latest", std::ios::trunc) << "step_00000099\n";
  auto [rc, out] = zaya_cli("ckpt verify " + latest);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(latest + " names step_00000099 but"), std::string::npos) << out;
}
