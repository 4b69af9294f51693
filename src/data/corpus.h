// The documents of a corpus as it ships: plain text, JSON lines or Parquet files, compressed
// or not, named one by one or as directories.
//
//   format       suffixes                                  a document is
//   JSON lines   .jsonl .json (+ .gz / .zst)               one line's --text-key string
//   plain text   .txt (+ .gz / .zst)                       a run of non-blank lines (or the file)
//   Parquet      .parquet (compressed inside, page by page)  one row of the --text-key column (data/parquet.h)
//
// The reader is sequential and cheap: it hands out raw records (a JSON line is parsed later,
// in parallel, by data/document.h), each with the file and line it came from for messages.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/byte_source.h"

namespace zaya {

enum class CorpusFormat { Text, JsonLines, Parquet };
const char* corpus_format_name(CorpusFormat f);  // "text", "jsonl", "parquet"

struct CorpusFile {
  std::string path;
  CorpusFormat format = CorpusFormat::Text;
  Compression compression = Compression::None;
  uint64_t bytes = 0;  // on disk
};

// The format of a file by its name; error naming the file and the supported suffixes.
CorpusFile corpus_file(const std::string& path);
// --input paths: a file as given, a directory as every supported file directly in it, sorted
// by name (other files there are passed over). Errors: a missing path, an unsupported file
// named explicitly, a directory with no supported file.
std::vector<CorpusFile> expand_corpus_inputs(const std::vector<std::string>& inputs);

struct RawRecord {
  std::string text;   // the document (text, Parquet), or the JSON line to parse
  uint32_t file = 0;  // index into the reader's files
  uint64_t line = 0;  // 1-based: the JSON line, the document's first line, or the Parquet row + 1
  bool json = false;  // text is a JSON line
  bool null = false;  // a null Parquet value
};

struct CorpusReaderOptions {
  bool document_per_file = false;  // plain text: each file is one document
  std::string column = "text";     // Parquet: the column (the --text-key)
};

class CorpusReader {
 public:
  CorpusReader(std::vector<CorpusFile> files, CorpusReaderOptions opt);
  ~CorpusReader();

  // The next record; false at the end of the last file.
  bool next(RawRecord& rec);
  const std::vector<CorpusFile>& files() const { return files_; }
  // Input bytes consumed so far (compressed sizes), for progress against the total size.
  uint64_t bytes_read() const;
  // "FILE:LINE" of a record, for messages.
  std::string where(const RawRecord& rec) const;

 private:
  bool next_text(RawRecord& rec);
  bool next_json(RawRecord& rec);
  bool next_parquet(RawRecord& rec);
  bool open_next_file();

  std::vector<CorpusFile> files_;
  CorpusReaderOptions opt_;
  size_t file_ = 0;           // index of the open file (== files_.size(): done)
  bool open_ = false;
  uint64_t done_bytes_ = 0;   // sizes of the files finished
  std::unique_ptr<LineReader> lines_;
  struct Parquet;
  std::unique_ptr<Parquet> parquet_;
};

}  // namespace zaya
