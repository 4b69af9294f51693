#include "ckpt/checkpoint.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bf16.h"
#include "core/error.h"
#include "core/io.h"

namespace zaya {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string(), ": cannot read");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

int64_t step_of(const std::string& name) {  // "step_00000100" -> 100, else -1
  if (name.rfind("step_", 0) != 0 || name.size() <= 5) return -1;
  for (size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  return std::stoll(name.substr(5));
}

uint64_t parse_hex64(const std::string& s, const std::string& where) {
  ZAYA_CHECK(s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos, where,
             ": checksum \"", s, "\" is not 16 hex digits");
  return std::stoull(s, nullptr, 16);
}

}  // namespace

std::string checkpoint_step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

uint64_t xxh3_of(const void* data, size_t n) { return XXH3_64bits(data, n); }

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---------------------------------------------------------------------------------------
// Writing

CheckpointWriter::CheckpointWriter(std::string root, int64_t step, std::string tag)
    : root_(std::move(root)), step_(step) {
  const std::string name = checkpoint_step_name(step);
  if (tag.empty()) tag = std::to_string(::getpid());
  tmp_ = (fs::path(root_) / (".tmp-" + name + "-" + tag)).string();
  final_ = (fs::path(root_) / name).string();
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) fail("checkpoint ", root_, ": cannot create directory (", ec.message(), ")");
  fs::create_directories(tmp_, ec);  // every rank of one save shares it: never cleared here
  if (ec) fail("checkpoint ", tmp_, ": cannot create directory (", ec.message(), ")");
}

void CheckpointWriter::add(const std::string& file, const std::string& tensor, DType dtype,
                           std::vector<int64_t> global_shape, size_t start, size_t numel, const void* data) {
  files_[file].push_back({tensor, dtype, std::move(global_shape), start, numel, data});
}

void CheckpointWriter::copy_file(const std::string& src, const std::string& name) { copies_.push_back({src, name}); }

json CheckpointWriter::write_files() {
  json tensors = json::array(), files = json::object();
  for (auto& [file, items] : files_) {
    SafetensorsWriter w;
    std::vector<std::string> keys;
    for (const Item& it : items) {
      size_t total = 1;
      for (int64_t d : it.shape) total *= size_t(d);
      ZAYA_CHECK(it.start + it.numel <= total, "checkpoint: slice [", it.start, ", ", it.start + it.numel,
                 ") of tensor ", it.tensor, " exceeds its ", total, " elements");
      const bool whole = it.start == 0 && it.numel == total;
      keys.push_back(whole ? it.tensor : cat(it.tensor, "@", it.start));
      std::vector<int64_t> shape = whole ? it.shape : std::vector<int64_t>{int64_t(it.numel)};
      w.add(keys.back(), it.dtype, shape, it.data, it.numel * dtype_size(it.dtype));
    }
    const std::string path = (fs::path(tmp_) / file).string();
    w.write(path);
    // Record where each slice landed and the checksum of the bytes now on disk.
    SafetensorsFile f(path);
    uint64_t header = 0;
    {
      std::ifstream in(path, std::ios::binary);
      unsigned char b[8] = {};
      in.read(reinterpret_cast<char*>(b), 8);
      for (int i = 0; i < 8; ++i) header |= uint64_t(b[i]) << (8 * i);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      const TensorEntry* e = f.find(keys[i]);
      ZAYA_CHECK(e, "checkpoint ", path, ": entry ", keys[i], " missing after write");
      tensors.push_back({{"name", it.tensor},
                         {"dtype", dtype_name(it.dtype)},
                         {"shape", it.shape},
                         {"slice",
                          {{"file", file},
                           {"key", keys[i]},
                           {"start", it.start},
                           {"numel", it.numel},
                           {"byte_begin", 8 + header + e->begin},
                           {"byte_end", 8 + header + e->end},
                           {"xxh3", hex64(xxh3_of(f.data(*e), e->end - e->begin))}}}});
    }
    files[file] = fs::file_size(path);
  }
  for (auto& [src, name] : copies_) {
    std::string bytes = read_text(src);
    write_file_atomic((fs::path(tmp_) / name).string(), bytes.data(), bytes.size());
    files[name] = bytes.size();
  }
  return {{"tensors", tensors}, {"files", files}};
}

std::string CheckpointWriter::commit(json header, const std::vector<json>& pieces) {
  // Merge every rank's slices into one entry per tensor.
  std::map<std::string, json> by_name;
  std::vector<std::string> order;
  json files = json::object();
  for (const json& piece : pieces) {
    for (auto& [k, v] : piece.at("files").items()) files[k] = v;
    for (const json& t : piece.at("tensors")) {
      const std::string name = t.at("name");
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        order.push_back(name);
        json e = {{"name", name}, {"dtype", t.at("dtype")}, {"shape", t.at("shape")}, {"slices", json::array()}};
        size_t n = 1;
        for (auto d : t.at("shape")) n *= d.get<size_t>();
        e["numel"] = n;
        it = by_name.emplace(name, std::move(e)).first;
      }
      ZAYA_CHECK(it->second["shape"] == t.at("shape") && it->second["dtype"] == t.at("dtype"), "checkpoint: tensor ",
                 name, " has slices of different shapes or dtypes");
      it->second["slices"].push_back(t.at("slice"));
    }
  }
  json tensors = json::array();
  for (const std::string& name : order) {
    json& e = by_name[name];
    std::vector<json> s(e["slices"].begin(), e["slices"].end());
    std::sort(s.begin(), s.end(), [](const json& a, const json& b) { return a["start"] < b["start"]; });
    size_t at = 0;
    for (const json& x : s) {
      ZAYA_CHECK(x["start"].get<size_t>() == at, "checkpoint: tensor ", name, " has a gap or overlap at element ", at);
      at += x["numel"].get<size_t>();
    }
    ZAYA_CHECK(at == e["numel"].get<size_t>(), "checkpoint: tensor ", name, " slices cover ", at, " of ",
               e["numel"].get<size_t>(), " elements");
    e["slices"] = s;
    tensors.push_back(std::move(e));
  }
  header["format"] = "zaya.ckpt.v1";
  header["step"] = step_;
  header["files"] = files;
  header["tensors"] = std::move(tensors);
  const std::string text = header.dump(1) + "\n";
  write_file_atomic((fs::path(tmp_) / "manifest.json").string(), text.data(), text.size());
  // Into place: a re-saved step (after a rollback) replaces the old directory.
  publish_dir(tmp_, final_);
  const std::string latest = fs::path(final_).filename().string() + "\n";
  write_file_atomic((fs::path(root_) / "latest").string(), latest.data(), latest.size());
  return final_;
}

std::vector<std::string> list_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t s = step_of(name);
    if (s >= 0 && it->is_directory()) found.push_back({s, it->path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

void prune_checkpoints(const std::string& root, int keep) {
  std::string latest;
  std::error_code ec;
  if (fs::exists(fs::path(root) / "latest")) latest = trim(read_text(fs::path(root) / "latest"));
  auto all = list_checkpoints(root);
  int excess = int(all.size()) - std::max(keep, 1);
  for (int i = 0; i < excess; ++i)
    if (fs::path(all[size_t(i)]).filename().string() != latest) fs::remove_all(all[size_t(i)], ec);
}

void remove_stale_temporaries(const std::string& root) {
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(".tmp-step_", 0) == 0 || name.rfind(".trash-step_", 0) == 0) {
      std::error_code ec2;
      fs::remove_all(it->path(), ec2);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Reading

namespace {

// The step directory a `latest` pointer file names (a directory beside the file).
std::string follow_pointer(const fs::path& file) {
  std::error_code ec;
  const auto bytes = fs::file_size(file, ec);
  ZAYA_CHECK(!ec && bytes <= 4096, "checkpoint ", file.string(),
             ": not a checkpoint pointer file (expected one line naming a step directory beside it)");
  const std::string name = trim(read_text(file));
  // A directory name beside the file, nothing else (a binary file must not be echoed).
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
  ZAYA_CHECK(plain && !name.empty() && name != "." && name != "..", "checkpoint ", file.string(),
             ": does not name a step directory (not a `latest` pointer file)");
  const fs::path dir = file.parent_path() / name;
  ZAYA_CHECK(fs::exists(dir / "manifest.json"), "checkpoint ", file.string(), " names ", name, " but ",
             (dir / "manifest.json").string(), " is missing");
  return dir.string();
}

}  // namespace

bool Checkpoint::is_checkpoint_path(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return true;  // a manifest or a pointer: resolve() checks which
  return fs::exists(p / "manifest.json", ec) || fs::exists(p / "latest", ec) || fs::exists(p / "ckpt" / "latest", ec);
}

std::string Checkpoint::resolve(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  ZAYA_CHECK(!path.empty() && fs::exists(p, ec), "checkpoint ", path, ": does not exist");
  if (fs::is_regular_file(p, ec)) {  // the manifest itself, or a `latest` pointer
    if (p.filename() == "manifest.json") return p.has_parent_path() ? p.parent_path().string() : ".";
    return follow_pointer(p);
  }
  if (fs::exists(p / "manifest.json")) return p.string();
  for (const fs::path& root : {p, p / "ckpt"})
    if (fs::exists(root / "latest")) return follow_pointer(root / "latest");
  fail("checkpoint ", path, ": no manifest.json, latest or ckpt/latest there");
}

Checkpoint::Checkpoint(const std::string& path) : dir_(resolve(path)) {
  const std::string mpath = (fs::path(dir_) / "manifest.json").string();
  try {
    manifest_ = json::parse(read_text(mpath));
  } catch (const json::exception& e) {
    fail("checkpoint ", mpath, ": not valid JSON (", e.what(), ")");
  }
  ZAYA_CHECK(manifest_.is_object() && manifest_.value("format", "") == "zaya.ckpt.v1", "checkpoint ", mpath,
             ": field format is not \"zaya.ckpt.v1\"");
  for (const char* k : {"step", "tensors", "state"})
    ZAYA_CHECK(manifest_.contains(k), "checkpoint ", mpath, ": missing field ", k);
  // step() reads it as int64: a float or a negative number is refused here, not cast.
  ZAYA_CHECK(manifest_["step"].is_number_unsigned() && manifest_["step"].get<uint64_t>() <= uint64_t(INT64_MAX),
             "checkpoint ", mpath, ": field step is ", manifest_["step"].dump(), ", not a step number");
  try {
    for (const json& t : manifest_["tensors"]) {
      Tensor x;
      x.name = t.at("name");
      x.dtype = parse_dtype(t.at("dtype"), mpath + " tensor " + x.name);
      // Counts are unsigned integers in the JSON: a float such as 1e300 would be a cast out of range.
      auto count = [&](const json& v, const char* field) -> size_t {
        if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t(1) << 56))
          fail("checkpoint ", mpath, ": tensor ", x.name, ": field ", field, " is ", v.dump(),
               ", not a count in [0, 2^56]");
        return size_t(v.get<uint64_t>());
      };
      if (!t.at("shape").is_array()) fail("checkpoint ", mpath, ": tensor ", x.name, ": field shape is not a list");
      for (const json& d : t.at("shape")) x.shape.push_back(int64_t(count(d, "shape")));
      x.numel = count(t.at("numel"), "numel");
      size_t at = 0;
      for (const json& s : t.at("slices")) {
        Slice y;
        y.file = s.at("file");
        y.key = s.at("key");
        y.start = count(s.at("start"), "slices.start");
        y.numel = count(s.at("numel"), "slices.numel");
        y.byte_begin = count(s.at("byte_begin"), "slices.byte_begin");
        y.byte_end = count(s.at("byte_end"), "slices.byte_end");
        y.xxh3 = parse_hex64(s.at("xxh3"), mpath + " tensor " + x.name);
        ZAYA_CHECK(y.start == at, "checkpoint ", mpath, ": tensor ", x.name, " has a gap or overlap at element ", at);
        ZAYA_CHECK(y.file.find('/') == std::string::npos && y.file.find("..") == std::string::npos, "checkpoint ", mpath,
                   ": tensor ", x.name, " names file \"", y.file, "\" outside the checkpoint");
        ZAYA_CHECK(fs::exists(fs::path(dir_) / y.file), "checkpoint ", dir_, ": file ", y.file, " (tensor ", x.name,
                   ") is missing");
        at += y.numel;
        x.slices.push_back(std::move(y));
      }
      ZAYA_CHECK(at == x.numel, "checkpoint ", mpath, ": tensor ", x.name, " slices cover ", at, " of ", x.numel,
                 " elements");
      index_[x.name] = tensors_.size();
      tensors_.push_back(std::move(x));
    }
  } catch (const json::exception& e) {
    fail("checkpoint ", mpath, ": malformed tensor entry (", e.what(), ")");
  }
}

Checkpoint::~Checkpoint() = default;

const Checkpoint::Tensor& Checkpoint::tensor(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("checkpoint ", dir_, ": no tensor ", name);
  return tensors_[it->second];
}

const SafetensorsFile& Checkpoint::file(const std::string& name) const {
  auto& f = files_[name];
  if (!f) f = std::make_unique<SafetensorsFile>((fs::path(dir_) / name).string());
  return *f;
}

void Checkpoint::check_slice(const Tensor& t, const Slice& s) const {
  const std::string id = s.file + "/" + s.key;
  if (verified_[id]) return;
  const SafetensorsFile& f = file(s.file);
  const TensorEntry* e = f.find(s.key);
  ZAYA_CHECK(e, "checkpoint ", dir_, ": file ", s.file, " has no entry ", s.key, " (tensor ", t.name, ")");
  ZAYA_CHECK(e->dtype == t.dtype && e->numel() == s.numel && e->end - e->begin == s.byte_end - s.byte_begin,
             "checkpoint ", dir_, ": file ", s.file, " entry ", s.key, " does not match the manifest (tensor ", t.name,
             ")");
  const uint64_t got = xxh3_of(f.data(*e), e->end - e->begin);
  ZAYA_CHECK(got == s.xxh3, "checkpoint ", dir_, ": checksum mismatch in file ", s.file, " for tensor ", t.name,
             " (expected ", hex64(s.xxh3), ", got ", hex64(got), ")");
  verified_[id] = true;
}

void Checkpoint::read(const std::string& name, float* dst, size_t start, size_t n,
                      const std::vector<int64_t>& expect_shape) const {
  const Tensor& t = tensor(name);
  if (!expect_shape.empty())
    ZAYA_CHECK(expect_shape == t.shape, "checkpoint ", dir_, ": tensor ", name, " has a different shape than the model's");
  if (n == npos) n = t.numel - std::min(start, t.numel);
  ZAYA_CHECK(start + n <= t.numel, "checkpoint ", dir_, ": read [", start, ", ", start + n, ") past tensor ", name,
             " (", t.numel, " elements)");
  ZAYA_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16, "checkpoint ", dir_, ": tensor ", name, " is ",
             dtype_name(t.dtype), ", expected F32 or BF16");
  for (const Slice& s : t.slices) {
    const size_t b = std::max(start, s.start), e = std::min(start + n, s.start + s.numel);
    if (b >= e) continue;
    check_slice(t, s);
    const SafetensorsFile& f = file(s.file);
    const uint8_t* src = f.data(*f.find(s.key));
    if (t.dtype == DType::F32) {
      std::memcpy(dst + (b - start), src + (b - s.start) * 4, (e - b) * 4);
    } else {
      for (size_t i = b; i < e; ++i) {
        bf16 h;
        std::memcpy(&h.bits, src + (i - s.start) * 2, 2);
        dst[i - start] = from_bf16(h);
      }
    }
  }
}

void Checkpoint::verify() const {
  for (const Tensor& t : tensors_)
    for (const Slice& s : t.slices) check_slice(t, s);
}

// ---------------------------------------------------------------------------------------
// The model inside a training checkpoint

ModelConfig checkpoint_model_config(const Checkpoint& ck) {
  const json& m = ck.manifest();
  ZAYA_CHECK(m.contains("model_config") && m["model_config"].contains("toml"), "checkpoint ", ck.dir(),
             ": manifest has no model_config.toml");
  ModelConfig c = parse_model_config_toml(m["model_config"]["toml"].get<std::string>(), ck.dir() + "/manifest.json");
  const json& st = ck.state();
  if (st.contains("trainer") && st["trainer"].contains("rope_theta"))
    c.rope_theta = st["trainer"]["rope_theta"].get<double>();
  return c;
}

template <class T>
void load_checkpoint_model(const Checkpoint& ck, Model<T>& m) {
  std::vector<float> buf;
  auto load = [&](const std::string& group, const ParamInfo& p, T* dst) {
    buf.resize(p.numel);
    ck.read(group + p.name, buf.data(), 0, p.numel, p.shape);
    for (size_t i = 0; i < p.numel; ++i) dst[i] = T(buf[i]);
  };
  for (const ParamInfo& p : m.layout.params.params) load("param/", p, m.params.data() + p.offset);
  for (const ParamInfo& p : m.layout.buffers.params) load("buffer/", p, m.buffers.data() + p.offset);
}
template void load_checkpoint_model<float>(const Checkpoint&, Model<float>&);
template void load_checkpoint_model<double>(const Checkpoint&, Model<double>&);

std::string checkpoint_tokenizer(const Checkpoint& ck) {
  const std::string name = ck.manifest().value("tokenizer", "");
  if (name.empty()) return "";
  const fs::path p = fs::path(ck.dir()) / name;
  ZAYA_CHECK(fs::exists(p), "checkpoint ", ck.dir(), ": tokenizer file ", name, " is missing");
  return p.string();
}

}  // namespace zaya
