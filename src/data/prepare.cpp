#include "data/prepare.h"

#include <omp.h>

#include <csignal>

#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/corpus.h"
#include "data/dedup_set.h"
#include "data/document.h"
#include "data/prepare_output.h"
#include "data/shard.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

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

// A record after the parallel stage: its document text, or why it is left out.
struct Doc {
  enum Status : uint8_t { Ok, Empty, Bad, Duplicate };
  std::string text;  // the document (or the error message for Bad)
  DocHash hash;
  size_t utf8_replaced = 0;
  Status status = Ok;
  bool val = false;  // goes to the validation split
};

// One record into a document: parse its JSON line, repair its UTF-8, hash it, pick its split.
// `json` is this thread's parser.
void make_document(RawRecord& rec, const TextKey& key, double val_fraction, JsonTextExtractor& json,
                   const CorpusReader& reader, Doc& d) {
  d = Doc{};
  if (rec.json) {
    // simdjson refuses invalid UTF-8 anywhere in a line: repair the line first.
    d.utf8_replaced = repair_utf8(rec.text);
    std::string why = json.extract(rec.text, key, d.text);
    if (!why.empty()) {
      d.status = Doc::Bad;
      d.text = reader.where(rec) + ": " + why;
      return;
    }
  } else if (rec.null) {
    d.status = Doc::Bad;
    d.text = reader.where(rec) + ": \"" + key.dotted + "\" is null, not a string";
    return;
  } else {
    d.text.swap(rec.text);
    d.utf8_replaced = repair_utf8(d.text);
  }
  if (d.text.empty()) {
    d.status = Doc::Empty;
    return;
  }
  d.hash = hash_document(d.text);
  d.val = goes_to_val(d.text, val_fraction);
}

// Batches of raw records, read ahead by a thread of their own (reading, decompressing and
// splitting lines overlap the tokenizing of the batch before).
struct Batch {
  std::vector<RawRecord> records;
  uint64_t bytes_read = 0;  // input bytes consumed once this batch was read
  std::exception_ptr error;  // the reader failed after these records
  bool last = false;
};

class ReadAhead {
 public:
  ReadAhead(CorpusReader& reader, size_t batch_bytes, size_t batch_records)
      : reader_(reader), batch_bytes_(batch_bytes), batch_records_(batch_records), thread_([this] { run(); }) {}
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Batch pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return b;
  }

 private:
  void run() {
    bool last = false;
    while (!last) {
      Batch b;
      try {
        size_t bytes = 0;
        RawRecord rec;
        while (bytes < batch_bytes_ && b.records.size() < batch_records_) {
          if (!reader_.next(rec)) {
            b.last = true;
            break;
          }
          bytes += rec.text.size();
          b.records.push_back(std::move(rec));
          rec = RawRecord{};
        }
      } catch (...) {
        b.error = std::current_exception();
        b.last = true;
      }
      b.bytes_read = reader_.bytes_read();
      last = b.last;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queue_.size() < 2; });
      if (stop_) return;
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  }
  CorpusReader& reader_;
  size_t batch_bytes_, batch_records_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// The document lines SentencePiece trains on, read (serially) from the corpus. Bad JSON lines
// are left for the main pass to report.
std::function<bool(std::string&)> training_lines(CorpusReader& reader, const TextKey& key) {
  auto json = std::make_shared<JsonTextExtractor>();
  auto doc = std::make_shared<std::string>();
  auto pos = std::make_shared<size_t>(0);
  return [&reader, &key, json, doc, pos](std::string& line) {
    while (*pos >= doc->size()) {
      RawRecord rec;
      if (!reader.next(rec)) return false;
      repair_utf8(rec.text);  // a JSON line's strings are valid UTF-8 once the line is
      if (rec.json) {
        if (!json->extract(rec.text, key, *doc).empty()) doc->clear();
      } else {
        doc->swap(rec.text);
      }
      *pos = 0;
    }
    size_t nl = doc->find('\n', *pos);
    if (nl == std::string::npos) nl = doc->size();
    line.assign(*doc, *pos, nl - *pos);
    *pos = nl + 1;
    return true;
  };
}

nlohmann::json counts_json(const PrepareCounts& c, bool dedup) {
  nlohmann::json j = {{"records", c.records},
                      {"duplicates_dropped", c.duplicates},
                      {"empty_skipped", c.empty},
                      {"bad_lines_skipped", c.bad_lines},
                      {"utf8_repaired_documents", c.utf8_documents},
                      {"utf8_replacements", c.utf8_replacements},
                      {"dedup", dedup}};
  if (!c.first_bad_line.empty()) j["first_bad_line"] = c.first_bad_line;
  return j;
}

}  // namespace

PrepareResult prepare_corpus(const PrepareOptions& opt) {
  Timer timer;
  ZAYA_CHECK(!opt.out_dir.empty(), "prepare: no --out directory");
  ZAYA_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "prepare: --val-fraction ", opt.val_fraction,
             " must be in [0, 1)");
  ZAYA_CHECK(opt.shard_tokens > 0, "prepare: --shard-tokens must be positive");
  ZAYA_CHECK(opt.output_format == "shards" || opt.output_format == "megatron", "prepare: --output-format \"",
             opt.output_format, "\": must be shards or megatron");
  ZAYA_CHECK(opt.threads >= 0, "prepare: --threads ", opt.threads, " must be >= 0");
  const TextKey key = parse_text_key(opt.text_key);
  const std::vector<CorpusFile> files = expand_corpus_inputs(opt.inputs);
  const CorpusReaderOptions read_opt{opt.document_per_file, opt.text_key};
  uint64_t total_bytes = 0;
  for (const auto& f : files) total_bytes += f.bytes;
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();

  std::unique_ptr<Tokenizer> tok;
  if (!opt.tokenizer.empty()) tok = load_tokenizer(opt.tokenizer);  // validates it before OUT is touched
  PrepareStaging staging(opt.out_dir);
  const fs::path out(opt.out_dir), stage(staging.dir());
  PrepareResult res;
  // The tokenizer goes in under the name of its kind (tokenizer.model, or tokenizer.json with
  // its tokenizer_config.json), staged with the outputs it made.
  std::string staged_tokenizer;
  if (!opt.tokenizer.empty()) {
    const auto tfiles = tokenizer_files(opt.tokenizer);
    for (const auto& [src, name] : tfiles) write_file_atomic((stage / name).string(), read_file_bytes(src));
    staged_tokenizer = (stage / tfiles[0].second).string();
    res.tokenizer_path = (out / tfiles[0].second).string();
  } else {
    staged_tokenizer = (stage / "tokenizer.model").string();
    res.tokenizer_path = (out / "tokenizer.model").string();
    CorpusReader train_reader(files, read_opt);
    SentencePieceTrainOptions topt = opt.train;
    if (topt.threads == 0) topt.threads = threads;
    const uint64_t text = train_sentencepiece(training_lines(train_reader, key), staged_tokenizer, topt);
    if (opt.on_note)
      opt.on_note("tokenizer: trained " + opt.train.model_type + " vocab " + std::to_string(opt.train.vocab_size) +
                  " on " + human_bytes(double(text)) + " of text -> " + res.tokenizer_path);
  }
  if (!tok) tok = load_tokenizer(staged_tokenizer);
  res.vocab_size = tok->vocab_size();
  const int eos = tok->eos_id();
  ZAYA_CHECK(eos >= 0 && eos < res.vocab_size, res.tokenizer_path, ": tokenizer has no EOS id");
  const uint32_t V = uint32_t(res.vocab_size);

  auto train_out = make_split_writer(opt.output_format, staging.dir(), "train", V, opt.shard_tokens);
  auto val_out = make_split_writer(opt.output_format, staging.dir(), "val", V, opt.shard_tokens);
  std::vector<uint64_t> train_counts(V, 0), val_counts(V, 0);
  PrepareCounts& counts = res.counts;
  DedupSet seen;
  const uint64_t limit = opt.max_tokens ? opt.max_tokens : UINT64_MAX;
  double last_progress = 0;
  bool done = false;

  std::vector<std::unique_ptr<JsonTextExtractor>> parsers;
  parsers.resize(static_cast<size_t>(threads));
  for (auto& p : parsers) p = std::make_unique<JsonTextExtractor>();
  std::vector<Doc> docs;
  std::vector<std::vector<int32_t>> encoded;
  std::vector<uint32_t> buf;
  CorpusReader reader(files, read_opt);
  ReadAhead ahead(reader, size_t(4) << 20, 8192);
  while (!done) {
    Batch batch = ahead.pop();
    const size_t n = batch.records.size();
    docs.resize(n);
    std::exception_ptr err;
    // Parse, repair and hash every record of the batch in parallel...
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (long i = 0; i < long(n); ++i) {
      try {
        make_document(batch.records[size_t(i)], key, opt.val_fraction, *parsers[size_t(omp_get_thread_num())], reader, docs[size_t(i)]);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    // ...then filter in input order (the first bad line is the one reported)...
    for (size_t i = 0; i < n; ++i) {
      Doc& d = docs[i];
      ++counts.records;
      if (d.status == Doc::Bad) {
        ZAYA_CHECK(opt.skip_bad_lines, d.text, " (--skip-bad-lines skips such lines)");
        if (counts.first_bad_line.empty()) counts.first_bad_line = d.text;
        ++counts.bad_lines;
        continue;
      }
      if (d.utf8_replaced) {
        ++counts.utf8_documents;
        counts.utf8_replacements += d.utf8_replaced;
      }
      if (d.status == Doc::Empty) {
        ++counts.empty;
      } else if (opt.dedup && !seen.insert(d.hash)) {
        d.status = Doc::Duplicate;
        ++counts.duplicates;
      }
    }
    // ...tokenize the documents kept in parallel...
    encoded.resize(n);
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (long i = 0; i < long(n); ++i) {
      try {
        if (docs[size_t(i)].status == Doc::Ok) encoded[size_t(i)] = tok->encode(docs[size_t(i)].text);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    // ...and write them in input order.
    for (size_t i = 0; i < n && !done; ++i) {
      if (docs[i].status != Doc::Ok) continue;
      const bool val = docs[i].val;
      PrepareSplit& split = val ? res.val : res.train;
      buf.assign(encoded[i].begin(), encoded[i].end());
      buf.push_back(uint32_t(eos));
      uint64_t room = limit - (res.train.tokens + res.val.tokens);
      if (buf.size() >= room) {
        buf.resize(size_t(room));
        done = res.hit_max_tokens = true;
      }
      (val ? val_out : train_out)->add_document(buf);
      auto& cnt = val ? val_counts : train_counts;
      for (uint32_t t : buf) ++cnt[t];
      split.tokens += buf.size();
      ++split.documents;
    }
    res.bytes_read = batch.bytes_read;
    if (opt.kill_after_documents && res.train.documents + res.val.documents >= opt.kill_after_documents)
      ::raise(SIGKILL);  // an injected kill at a known stage: outputs half written, staged only
    if (batch.error && !done) std::rethrow_exception(batch.error);
    if (batch.last) break;
    double t = timer.seconds();
    if (opt.on_progress && opt.progress_seconds > 0 && t - last_progress >= opt.progress_seconds) {
      last_progress = t;
      opt.on_progress({res.bytes_read, total_bytes, res.train.documents + res.val.documents,
                       res.train.tokens + res.val.tokens, t});
    }
  }
  res.train.shards = train_out->finish();
  res.val.shards = val_out->finish();
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

  // Paths as they will be once committed.
  for (auto* paths : {&res.train.shards, &res.val.shards})
    for (auto& p : *paths) p = (out / fs::path(p).filename()).string();
  auto names = [](const std::vector<std::string>& paths) {
    std::vector<std::string> o;
    for (const auto& p : paths) o.push_back(fs::path(p).filename().string());
    return o;
  };
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& f : files)
    sources.push_back({{"path", f.path},
                       {"bytes", f.bytes},
                       {"format", corpus_format_name(f.format)},
                       {"compression", compression_name(f.compression)}});
  const bool megatron = opt.output_format == "megatron";
  auto split_json = [&](const PrepareSplit& s, const char* name) {
    nlohmann::json j = {{"tokens", s.tokens}, {"documents", s.documents}};
    if (megatron)
      j["megatron_prefix"] = std::string(name) + "_text_document";
    else
      j["shards"] = names(s.shards);
    return j;
  };
  nlohmann::json meta = {
      {"format", megatron ? "megatron.mmidx" : "zaya.tokens.v1"},
      {"output_format", opt.output_format},
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
      {"text_key", opt.text_key},
      {"val_fraction", opt.val_fraction},
      {"max_tokens", opt.max_tokens},
      {"hit_max_tokens", res.hit_max_tokens},
      {"bytes_read", res.bytes_read},
      {"sources", sources},
      {"filtered", counts_json(counts, opt.dedup)},
      {"train", split_json(res.train, "train")},
      {"val", split_json(res.val, "val")},
      {"train_unigram_entropy_nats", res.train_unigram_entropy},
      {"val_unigram_cross_entropy_nats", res.val_unigram_cross_entropy},
  };
  if (!megatron) {
    meta["shard_version"] = kShardVersion;
    meta["token_dtype"] = "uint32";
  }
  if (opt.tokenizer.empty())
    meta["tokenizer"]["training"] = {{"model_type", opt.train.model_type},
                                     {"vocab_size", opt.train.vocab_size},
                                     {"character_coverage", opt.train.character_coverage},
                                     {"byte_fallback", opt.train.byte_fallback}};
  res.meta_path = (out / "meta.json").string();
  staging.commit(meta.dump(2) + "\n", opt.on_note);
  res.seconds = timer.seconds();
  return res;
}

}  // namespace zaya
