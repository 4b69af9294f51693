#include "data/corpus.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/parquet.h"

namespace zaya {

namespace fs = std::filesystem;

namespace {

const char* kSupported = ".jsonl, .json, .txt (each also as .gz or .zst), .parquet";

// The name without a compression suffix: "a.jsonl.zst" -> "a.jsonl".
std::string strip_compression(const std::string& name) {
  for (std::string_view s : {".gz", ".zst", ".zstd"})
    if (name.ends_with(s)) return name.substr(0, name.size() - s.size());
  return name;
}

bool supported_name(const std::string& name) {
  std::string base = strip_compression(name);
  return base.ends_with(".jsonl") || base.ends_with(".json") || base.ends_with(".txt") ||
         (base == name && name.ends_with(".parquet"));
}

}  // namespace

const char* corpus_format_name(CorpusFormat f) {
  switch (f) {
    case CorpusFormat::JsonLines: return "jsonl";
    case CorpusFormat::Parquet: return "parquet";
    default: return "text";
  }
}

CorpusFile corpus_file(const std::string& path) {
  CorpusFile f;
  f.path = path;
  f.compression = compression_of(path);
  const std::string base = strip_compression(fs::path(path).filename().string());
  if (base.ends_with(".jsonl") || base.ends_with(".json"))
    f.format = CorpusFormat::JsonLines;
  else if (base.ends_with(".txt"))
    f.format = CorpusFormat::Text;
  else if (base.ends_with(".parquet") && f.compression == Compression::None)
    f.format = CorpusFormat::Parquet;  // compressed page by page inside
  else
    fail(path, ": unsupported input (supported: ", kSupported, ")");
  std::error_code ec;
  f.bytes = fs::file_size(path, ec);
  ZAYA_CHECK(!ec, path, ": cannot read its size (", ec.message(), ")");
  return f;
}

std::vector<CorpusFile> expand_corpus_inputs(const std::vector<std::string>& inputs) {
  ZAYA_CHECK(!inputs.empty(), "prepare: no --input");
  std::vector<CorpusFile> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(in)) {
        const std::string name = e.path().filename().string();
        if (!name.empty() && name[0] != '.' && e.is_regular_file() && supported_name(name))
          names.push_back(e.path().string());
      }
      ZAYA_CHECK(!names.empty(), in, ": directory holds no corpus file (supported: ", kSupported, ")");
      std::sort(names.begin(), names.end());
      for (const auto& n : names) out.push_back(corpus_file(n));
    } else {
      ZAYA_CHECK(fs::is_regular_file(in, ec), in, ": input not found");
      out.push_back(corpus_file(in));
    }
  }
  return out;
}

struct CorpusReader::Parquet {
  ParquetStringColumn column;
  Parquet(const std::string& path, const std::string& name) : column(path, name) {}
};

CorpusReader::CorpusReader(std::vector<CorpusFile> files, CorpusReaderOptions opt)
    : files_(std::move(files)), opt_(std::move(opt)) {}
CorpusReader::~CorpusReader() = default;

uint64_t CorpusReader::bytes_read() const {
  uint64_t cur = 0;
  if (open_ && lines_) cur = lines_->raw_bytes_read();
  if (open_ && parquet_) cur = parquet_->column.bytes_read();
  return done_bytes_ + cur;
}

std::string CorpusReader::where(const RawRecord& rec) const {
  const CorpusFile& f = files_.at(rec.file);
  if (f.format == CorpusFormat::Parquet) return cat(f.path, ": row ", rec.line - 1);
  return cat(f.path, ":", rec.line);
}

bool CorpusReader::open_next_file() {
  if (file_ >= files_.size()) return false;
  const CorpusFile& f = files_[file_];
  if (f.format == CorpusFormat::Parquet)
    parquet_ = std::make_unique<Parquet>(f.path, opt_.column);
  else
    lines_ = std::make_unique<LineReader>(f.path);
  open_ = true;
  return true;
}

bool CorpusReader::next(RawRecord& rec) {
  while (file_ < files_.size()) {
    if (!open_) open_next_file();
    bool got = false;
    switch (files_[file_].format) {
      case CorpusFormat::JsonLines: got = next_json(rec); break;
      case CorpusFormat::Text: got = next_text(rec); break;
      case CorpusFormat::Parquet: got = next_parquet(rec); break;
    }
    if (got) {
      rec.file = uint32_t(file_);
      return true;
    }
    done_bytes_ += files_[file_].bytes;
    lines_.reset();
    parquet_.reset();
    open_ = false;
    ++file_;
  }
  return false;
}

bool CorpusReader::next_json(RawRecord& rec) {
  std::string_view line;
  while (lines_->next(line)) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank lines hold no document
    rec.text.assign(line.data(), line.size());
    rec.line = lines_->line_number();
    rec.json = true;
    rec.null = false;
    return true;
  }
  return false;
}

// Plain text: a document is a run of non-blank lines joined by '\n' ("blank": only spaces and
// tabs; a '\r' before '\n' is dropped), with trailing whitespace trimmed. With
// document_per_file, blank lines inside the file's text are kept and the file is one document.
bool CorpusReader::next_text(RawRecord& rec) {
  rec.text.clear();
  rec.json = rec.null = false;
  std::string_view line;
  auto finish = [&] {
    std::string& d = rec.text;
    while (!d.empty() && (d.back() == '\n' || d.back() == ' ' || d.back() == '\t')) d.pop_back();
    return true;
  };
  while (lines_->next(line)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (!blank || (opt_.document_per_file && !rec.text.empty())) {
      if (rec.text.empty()) rec.line = lines_->line_number();
      else rec.text += '\n';
      rec.text.append(line.data(), line.size());
      continue;
    }
    if (!rec.text.empty()) return finish();
  }
  if (!rec.text.empty()) return finish();
  return false;
}

bool CorpusReader::next_parquet(RawRecord& rec) {
  if (!parquet_->column.next(rec.text, rec.null)) return false;
  rec.line = parquet_->column.row() + 1;
  rec.json = false;
  return true;
}

}  // namespace zaya
