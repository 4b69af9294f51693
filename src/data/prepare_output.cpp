#include "data/prepare_output.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/io.h"
#include "data/megatron.h"
#include "data/shard.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStagingPrefix = ".prepare-";

// Shards of one split: NAME_000.bin, NAME_001.bin, ... of at most shard_tokens each.
class ShardSplitWriter final : public SplitWriter {
 public:
  ShardSplitWriter(std::string dir, std::string name, uint32_t vocab, uint64_t shard_tokens)
      : dir_(std::move(dir)), name_(std::move(name)), vocab_(vocab), shard_tokens_(shard_tokens) {}

  void add_document(std::span<const uint32_t> toks) override {
    while (!toks.empty()) {
      if (!cur_) open_next();
      size_t take = size_t(std::min<uint64_t>(toks.size(), shard_tokens_ - cur_->token_count()));
      cur_->append(toks.first(take));
      toks = toks.subspan(take);
      if (cur_->token_count() == shard_tokens_) close_current();
    }
  }
  std::vector<std::string> finish() override {
    if (cur_) close_current();
    if (paths_.empty()) {
      open_next();
      close_current();
    }
    return paths_;
  }

 private:
  void open_next() {
    char name[64];
    std::snprintf(name, sizeof name, "%s_%03zu.bin", name_.c_str(), paths_.size());
    cur_ = std::make_unique<ShardWriter>((fs::path(dir_) / name).string(), vocab_);
  }
  void close_current() {
    cur_->finish();
    paths_.push_back(cur_->path());
    cur_.reset();
  }
  std::string dir_, name_;
  uint32_t vocab_;
  uint64_t shard_tokens_;
  std::unique_ptr<ShardWriter> cur_;
  std::vector<std::string> paths_;
};

// A Megatron-LM indexed dataset: NAME_text_document.bin / .idx (preprocess_data.py's names
// for the key "text"), one sequence per document.
class MegatronSplitWriter final : public SplitWriter {
 public:
  MegatronSplitWriter(const std::string& dir, const std::string& name, uint32_t vocab)
      : prefix_((fs::path(dir) / (name + "_text_document")).string()), writer_(prefix_, vocab) {}
  void add_document(std::span<const uint32_t> toks) override { writer_.add_document(toks); }
  std::vector<std::string> finish() override {
    writer_.finish();
    return {prefix_ + ".bin", prefix_ + ".idx"};
  }

 private:
  std::string prefix_;
  MegatronWriter writer_;
};

bool process_alive(long pid) { return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM); }

}  // namespace

std::unique_ptr<SplitWriter> make_split_writer(const std::string& format, const std::string& dir,
                                               const std::string& name, uint32_t vocab, uint64_t shard_tokens) {
  if (format == "shards") return std::make_unique<ShardSplitWriter>(dir, name, vocab, shard_tokens);
  if (format == "megatron") return std::make_unique<MegatronSplitWriter>(dir, name, vocab);
  fail("prepare: --output-format \"", format, "\": must be shards or megatron");
}

PrepareStaging::PrepareStaging(std::string out_dir) : out_(std::move(out_dir)) {
  std::error_code ec;
  created_ = !fs::exists(out_, ec);
  fs::create_directories(out_, ec);
  ZAYA_CHECK(fs::is_directory(out_), out_, ": cannot create output directory: ", ec.message());
  for (const auto& e : fs::directory_iterator(out_)) {  // staging of killed runs
    const std::string name = e.path().filename().string();
    if (name.rfind(kStagingPrefix, 0) != 0) continue;
    long pid = std::strtol(name.c_str() + std::strlen(kStagingPrefix), nullptr, 10);
    if (pid != long(::getpid()) && process_alive(pid)) continue;  // another prepare at work
    fs::remove_all(e.path(), ec);
  }
  dir_ = (fs::path(out_) / (kStagingPrefix + std::to_string(::getpid()))).string();
  fs::create_directories(dir_, ec);
  ZAYA_CHECK(!ec, dir_, ": cannot create staging directory: ", ec.message());
}

PrepareStaging::~PrepareStaging() {
  std::error_code ec;
  if (committed_) return;
  fs::remove_all(dir_, ec);
  if (created_ && fs::is_empty(out_, ec)) fs::remove(out_, ec);  // a failed run leaves no trace
}

void PrepareStaging::commit(const std::string& meta_text, const std::function<void(const std::string&)>& note) {
  const fs::path out(out_);
  std::error_code ec;
  // Without meta.json, readers refuse the directory while its files change.
  fs::remove(out / "meta.json", ec);
  fsync_parent_dir((out / "meta.json").string());
  std::set<std::string> staged;
  for (const auto& e : fs::directory_iterator(dir_)) staged.insert(e.path().filename().string());
  for (const auto& name : staged) {
    fs::rename(fs::path(dir_) / name, out / name, ec);
    ZAYA_CHECK(!ec, (out / name).string(), ": cannot move into place: ", ec.message());
  }
  // Outputs of a previous prepare that this one did not write: shards of a larger run, a dataset of
  // the other format, a tokenizer of the other kind.
  static const std::regex outputs("(train|val)_[0-9]{3,}\\.bin|(train|val)_text_document\\.(bin|idx)");
  const bool json_tok = staged.count("tokenizer.json") > 0, model_tok = staged.count("tokenizer.model") > 0;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    bool stale = std::regex_match(name, outputs) && !staged.count(name);
    if (json_tok && name == "tokenizer.model") stale = true;
    if (model_tok && (name == "tokenizer.json" || name == "tokenizer_config.json")) stale = true;
    if (!stale) continue;
    if (note) note("prepare: removing stale " + e.path().string());
    fs::remove(e.path(), ec);
  }
  fsync_dir(out_);
  write_file_atomic((out / "meta.json").string(), meta_text);
  fs::remove_all(dir_, ec);
  committed_ = true;
}

}  // namespace zaya
