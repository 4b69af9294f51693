// `zaya prepare` as a library call: corpus files (plain text, JSON lines, Parquet; gzip or
// zstd) -> documents -> tokenizer (trained or loaded) -> token shards, or a Megatron-LM
// indexed dataset.
//
// Output directory:
//   tokenizer.model | tokenizer.json (+ tokenizer_config.json)
//   train_000.bin, ...       token shards of the training split (see data/shard.h), or with
//   val_000.bin, ...         --output-format megatron: train_text_document.{bin,idx} and
//                            val_text_document.{bin,idx} (data/megatron.h)
//   meta.json                tokens/documents per split, outputs, tokenizer, sources, and the
//                            count of everything skipped or changed
//
// Documents (data/corpus.h): a JSON line's --text-key string, a Parquet row, or a run of
// non-blank lines of plain text; each is followed by EOS. Exact duplicates (by a 128-bit
// content hash) are dropped unless dedup is off, empty documents are skipped, invalid UTF-8 is
// replaced with U+FFFD. A malformed JSON line, a missing key or a value that is not a string is
// an error naming FILE:LINE, or with skip_bad_lines is skipped and counted.
//
// The train/val split is a pure function of a document's text (a hash below val_fraction
// goes to val), so it does not depend on file order.
//
// Streaming: one thread reads and decompresses ahead while every thread parses, repairs,
// hashes and tokenizes a batch; the results are written in input order, so the output is the
// same bytes at any thread count and memory does not grow with the corpus (but for 32 bytes a
// document of the dedup table). Outputs are written into a hidden staging directory in the
// output directory and moved into place at the end (meta.json last): a killed prepare leaves
// the previous output whole, and the next run removes the staging left behind.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zaya {

struct PrepareProgress {
  uint64_t bytes_read = 0, total_bytes = 0;  // of the input files, as on disk
  uint64_t documents = 0, tokens = 0;        // written so far, train + val
  double seconds = 0;                        // since the start
};

struct PrepareOptions {
  std::vector<std::string> inputs;  // corpus files or directories (data/corpus.h)
  std::string out_dir;
  std::string tokenizer;            // an existing tokenizer to use; empty: train one
  SentencePieceTrainOptions train;  // when training (vocab_size, model_type, ...)
  std::string text_key = "text";    // JSON lines: the document's field ("meta.content": nested); Parquet: the column
  double val_fraction = 0.01;
  uint64_t max_tokens = 0;                  // stop after this many tokens (train + val); 0: all
  uint64_t shard_tokens = uint64_t(1) << 27;  // tokens per shard file (512 MiB)
  bool document_per_file = false;           // plain text: one document per file
  bool dedup = true;                        // drop exact duplicate documents
  bool skip_bad_lines = false;              // skip and count bad JSON lines instead of failing
  std::string output_format = "shards";     // "shards" (zaya's) or "megatron"
  int threads = 0;                          // 0: OpenMP's default
  double progress_seconds = 2.0;            // interval of on_progress calls; <= 0: none
  // Fault injection (tests): raise SIGKILL once this many documents are written (0: never).
  // `zaya prepare` takes it from ZAYA_PREPARE_KILL_AFTER_DOCS.
  uint64_t kill_after_documents = 0;
  // The library prints nothing: the caller (zaya prepare) prints these.
  std::function<void(const PrepareProgress&)> on_progress;
  std::function<void(const std::string&)> on_note;  // "tokenizer: trained ...", "removing stale shard ..."
};

struct PrepareSplit {
  uint64_t tokens = 0, documents = 0;
  std::vector<std::string> shards;  // full paths (shards, or the Megatron prefix's .bin and .idx)
};

// What the pipeline dropped or changed, by reason (all also in meta.json).
struct PrepareCounts {
  uint64_t records = 0;             // documents read from the inputs, before any filter
  uint64_t duplicates = 0;          // exact duplicates dropped
  uint64_t empty = 0;               // empty documents skipped
  uint64_t bad_lines = 0;           // JSON lines skipped (skip_bad_lines)
  uint64_t utf8_documents = 0;      // documents with invalid UTF-8 repaired
  uint64_t utf8_replacements = 0;   // U+FFFD written for invalid sequences
  std::string first_bad_line;       // "FILE:LINE: reason" of the first bad line skipped
};

struct PrepareResult {
  std::string tokenizer_path, meta_path;
  int vocab_size = 0;
  PrepareSplit train, val;
  PrepareCounts counts;
  uint64_t bytes_read = 0;
  bool hit_max_tokens = false;
  double seconds = 0;
  double train_unigram_entropy = 0;  // nats/token of the train split under its own unigram
  double val_unigram_cross_entropy = 0;  // nats/token of val under train's unigram (add-one)
};

PrepareResult prepare_corpus(const PrepareOptions& opt);

}  // namespace zaya
