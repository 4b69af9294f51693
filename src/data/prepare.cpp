#include "data/prepare.h"

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/shard.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

// Yields documents from the input files: blank-line separated, or one per file.
class DocumentReader {
 public:
  DocumentReader(const std::vector<std::string>& files, bool per_file) : files_(files), per_file_(per_file) {}

  // Next non-empty document, without a trailing newline; false at the end of the inputs.
  bool next(std::string& doc) {
    doc.clear();
    while (true) {
      if (!in_.is_open()) {
        if (file_ >= files_.size()) return false;
        in_.open(files_[file_], std::ios::binary);
        ZAYA_CHECK(in_.is_open(), files_[file_], ": cannot open input");
      }
      bool got = bool(std::getline(in_, line_));
      if (got) {
        bytes_ += line_.size() + 1;
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        bool blank = line_.find_first_not_of(" \t") == std::string::npos;
        if (!blank || (per_file_ && !doc.empty())) {
          if (!doc.empty()) doc += '\n';
          doc += line_;
          continue;
        }
        if (!doc.empty()) return finish(doc);
        continue;
      }
      ZAYA_CHECK(in_.eof(), files_[file_], ": read error");
      in_.close();
      in_.clear();
      ++file_;
      if (!doc.empty()) return finish(doc);
    }
  }
  uint64_t bytes() const { return bytes_; }

 private:
  static bool finish(std::string& doc) {
    while (!doc.empty() && (doc.back() == '\n' || doc.back() == ' ' || doc.back() == '\t')) doc.pop_back();
    return true;
  }
  const std::vector<std::string>& files_;
  bool per_file_;
  size_t file_ = 0;
  uint64_t bytes_ = 0;
  std::ifstream in_;
  std::string line_;
};

// Shards of one split: prefix_000.bin, prefix_001.bin, ... of at most shard_tokens each.
class ShardSequence {
 public:
  ShardSequence(std::string dir, std::string prefix, uint32_t vocab, uint64_t shard_tokens)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), vocab_(vocab), shard_tokens_(shard_tokens) {}

  void append(std::span<const uint32_t> toks) {
    while (!toks.empty()) {
      if (!cur_) open_next();
      size_t take = size_t(std::min<uint64_t>(toks.size(), shard_tokens_ - cur_->token_count()));
      cur_->append(toks.first(take));
      toks = toks.subspan(take);
      if (cur_->token_count() == shard_tokens_) close_current();
    }
  }
  // Closes the last shard; a split with no tokens still gets one (empty) shard.
  std::vector<std::string> finish() {
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
    std::snprintf(name, sizeof name, "%s_%03zu.bin", prefix_.c_str(), paths_.size());
    cur_ = std::make_unique<ShardWriter>((fs::path(dir_) / name).string(), vocab_);
  }
  void close_current() {
    cur_->finish();
    paths_.push_back(cur_->path());
    cur_.reset();
  }
  std::string dir_, prefix_;
  uint32_t vocab_;
  uint64_t shard_tokens_;
  std::unique_ptr<ShardWriter> cur_;
  std::vector<std::string> paths_;
};

bool goes_to_val(const std::string& doc, double val_fraction) {
  if (val_fraction <= 0) return false;
  double u = double(splitmix64(hash_name(doc)) >> 11) * 0x1.0p-53;
  return u < val_fraction;
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.is_open(), path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}


// Removes train_NNN.bin / val_NNN.bin left by an earlier, larger run in the same directory.
void remove_stale_shards(const std::string& dir, const std::vector<std::string>& keep,
                         const std::function<void(const std::string&)>& note) {
  static const std::regex pattern("(train|val)_[0-9]{3,}\\.bin");
  std::set<std::string> keep_names;
  for (const auto& p : keep) keep_names.insert(fs::path(p).filename().string());
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (std::regex_match(name, pattern) && !keep_names.count(name)) {
      if (note) note("prepare: removing stale shard " + e.path().string());
      fs::remove(e.path());
    }
  }
}

}  // namespace

PrepareResult prepare_corpus(const PrepareOptions& opt) {
  Timer timer;
  ZAYA_CHECK(!opt.inputs.empty(), "prepare: no --input files");
  ZAYA_CHECK(!opt.out_dir.empty(), "prepare: no --out directory");
  ZAYA_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "prepare: --val-fraction ", opt.val_fraction,
             " must be in [0, 1)");
  ZAYA_CHECK(opt.shard_tokens > 0, "prepare: --shard-tokens must be positive");
  uint64_t total_bytes = 0;
  for (const auto& f : opt.inputs) {
    ZAYA_CHECK(fs::is_regular_file(f), f, ": input file not found");
    total_bytes += fs::file_size(f);
  }
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  ZAYA_CHECK(fs::is_directory(opt.out_dir), opt.out_dir, ": cannot create output directory: ", ec.message());

  PrepareResult res;
  const fs::path out(opt.out_dir);
  // The tokenizer goes in under the name of its kind (tokenizer.model, or tokenizer.json with
  // its tokenizer_config.json); a previous run's tokenizer of the other kind is removed so
  // that readers (find_model_tokenizer) cannot pick the stale one.
  auto replace_other_kind = [&](bool json) {
    for (const char* name : json ? std::vector<const char*>{"tokenizer.model"}
                                 : std::vector<const char*>{"tokenizer.json", "tokenizer_config.json"})
      fs::remove(out / name);
  };
  if (!opt.tokenizer.empty()) {
    load_tokenizer(opt.tokenizer);  // validates the given file; errors name it
    const auto files = tokenizer_files(opt.tokenizer);
    for (const auto& [src, name] : files) {
      const fs::path dst = out / name;
      if (!fs::exists(dst) || !fs::equivalent(src, dst)) write_file_atomic(dst.string(), read_file_bytes(src));
    }
    res.tokenizer_path = (out / files[0].second).string();
    replace_other_kind(files[0].second == "tokenizer.json");
  } else {
    res.tokenizer_path = (out / "tokenizer.model").string();
    const uint64_t text = train_sentencepiece(opt.inputs, res.tokenizer_path, opt.train);
    if (opt.on_note)
      opt.on_note("tokenizer: trained " + opt.train.model_type + " vocab " + std::to_string(opt.train.vocab_size) +
                  " on " + human_bytes(double(text)) + " of text -> " + res.tokenizer_path);
    replace_other_kind(false);
  }
  std::unique_ptr<Tokenizer> tok = load_tokenizer(res.tokenizer_path);
  res.vocab_size = tok->vocab_size();
  const int eos = tok->eos_id();
  ZAYA_CHECK(eos >= 0 && eos < res.vocab_size, res.tokenizer_path, ": tokenizer has no EOS id");
  const uint32_t V = uint32_t(res.vocab_size);

  ShardSequence train_out(opt.out_dir, "train", V, opt.shard_tokens), val_out(opt.out_dir, "val", V, opt.shard_tokens);
  std::vector<uint64_t> train_counts(V, 0), val_counts(V, 0);
  DocumentReader reader(opt.inputs, opt.document_per_file);
  const uint64_t limit = opt.max_tokens ? opt.max_tokens : UINT64_MAX;
  double last_progress = 0;
  bool done = false;
  std::vector<std::string> docs;
  std::vector<std::vector<int32_t>> encoded;
  std::vector<uint32_t> buf;
  while (!done) {
    // Read a batch of documents, then encode it in parallel (SentencePiece's Encode is const).
    docs.clear();
    // Up to 8 MB of text per batch; near --max-tokens only about what the rest needs.
    uint64_t room = limit - (res.train.tokens + res.val.tokens);
    const uint64_t max_batch = uint64_t(8) << 20, bytes_per_token = 8;  // ~2x what English text needs
    size_t batch_limit = size_t(room >= max_batch / bytes_per_token
                                    ? max_batch
                                    : std::max<uint64_t>(uint64_t(64) << 10, room * bytes_per_token));
    size_t batch_bytes = 0;
    std::string doc;
    while (batch_bytes < batch_limit && docs.size() < 16384 && reader.next(doc)) {
      batch_bytes += doc.size();
      docs.push_back(std::move(doc));
    }
    if (docs.empty()) break;
    encoded.assign(docs.size(), {});
    std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 16)
    for (long i = 0; i < long(docs.size()); ++i) {
      try {
        encoded[size_t(i)] = tok->encode(docs[size_t(i)]);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    for (size_t i = 0; i < docs.size() && !done; ++i) {
      bool val = goes_to_val(docs[i], opt.val_fraction);
      PrepareSplit& split = val ? res.val : res.train;
      buf.assign(encoded[i].begin(), encoded[i].end());
      buf.push_back(uint32_t(eos));
      uint64_t room = limit - (res.train.tokens + res.val.tokens);
      if (buf.size() >= room) {
        buf.resize(size_t(room));
        done = res.hit_max_tokens = true;
      }
      (val ? val_out : train_out).append(buf);
      auto& counts = val ? val_counts : train_counts;
      for (uint32_t t : buf) ++counts[t];
      split.tokens += buf.size();
      ++split.documents;
    }
    res.bytes_read = reader.bytes();
    double t = timer.seconds();
    if (opt.on_progress && opt.progress_seconds > 0 && t - last_progress >= opt.progress_seconds) {
      last_progress = t;
      opt.on_progress({res.bytes_read, total_bytes, res.train.tokens + res.val.tokens, t});
    }
  }
  res.bytes_read = reader.bytes();
  res.train.shards = train_out.finish();
  res.val.shards = val_out.finish();
  std::vector<std::string> all = res.train.shards;
  all.insert(all.end(), res.val.shards.begin(), res.val.shards.end());
  remove_stale_shards(opt.out_dir, all, opt.on_note);
  if (opt.val_fraction > 0 && res.val.tokens == 0)
    log_warn("prepare: no document went to the validation split (", res.train.documents,
             " documents, --val-fraction ", opt.val_fraction, ")");

  // Unigram baselines: the entropy of train under its own token frequencies, and the
  // cross-entropy of val under train's add-one smoothed frequencies (nats/token).
  double ntrain = double(res.train.tokens), nval = double(res.val.tokens);
  for (uint32_t v = 0; v < V; ++v) {
    if (train_counts[v]) {
      double p = double(train_counts[v]) / ntrain;
      res.train_unigram_entropy -= p * std::log(p);
    }
    if (val_counts[v])
      res.val_unigram_cross_entropy -=
          double(val_counts[v]) / nval * std::log((double(train_counts[v]) + 1) / (ntrain + double(V)));
  }

  auto names = [](const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const auto& p : paths) out.push_back(fs::path(p).filename().string());
    return out;
  };
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& f : opt.inputs) sources.push_back({{"path", f}, {"bytes", fs::file_size(f)}});
  nlohmann::json meta = {
      {"format", "zaya.tokens.v1"},
      {"shard_version", kShardVersion},
      {"token_dtype", "uint32"},
      {"tokenizer",
       {{"kind", tok->kind()},
        {"file", fs::path(res.tokenizer_path).filename().string()},
        {"trained", opt.tokenizer.empty()},
        {"source", opt.tokenizer.empty() ? std::string() : opt.tokenizer},
        {"vocab_size", res.vocab_size},
        {"pad_id", tok->pad_id()},
        {"eos_id", eos},
        {"bos_id", tok->bos_id()},
        {"unk_id", tok->unk_id()}}},
      {"documents", opt.document_per_file ? "one per input file" : "separated by blank lines"},
      {"val_fraction", opt.val_fraction},
      {"max_tokens", opt.max_tokens},
      {"hit_max_tokens", res.hit_max_tokens},
      {"bytes_read", res.bytes_read},
      {"sources", sources},
      {"train",
       {{"tokens", res.train.tokens}, {"documents", res.train.documents}, {"shards", names(res.train.shards)}}},
      {"val", {{"tokens", res.val.tokens}, {"documents", res.val.documents}, {"shards", names(res.val.shards)}}},
      {"train_unigram_entropy_nats", res.train_unigram_entropy},
      {"val_unigram_cross_entropy_nats", res.val_unigram_cross_entropy},
  };
  if (opt.tokenizer.empty())
    meta["tokenizer"]["training"] = {{"model_type", opt.train.model_type},
                                     {"vocab_size", opt.train.vocab_size},
                                     {"character_coverage", opt.train.character_coverage},
                                     {"byte_fallback", opt.train.byte_fallback}};
  res.meta_path = (fs::path(opt.out_dir) / "meta.json").string();
  write_file_atomic(res.meta_path, meta.dump(2) + "\n");
  res.seconds = timer.seconds();
  return res;
}

}  // namespace zaya
