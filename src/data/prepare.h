// `zaya prepare` as a library call: tokenizer (trained or loaded), then text -> token shards.
//
// Output directory:
//   tokenizer.model          the SentencePiece model (trained here, or a copy of --tokenizer)
//   train_000.bin, ...       token shards of the training split (see data/shard.h)
//   val_000.bin, ...         token shards of the validation split (val_000.bin always exists)
//   meta.json                tokens/documents per split, shard lists, tokenizer, sources
//
// Documents: text separated by blank lines (or one document per input file); lines inside a
// document are joined with '\n' and the document is followed by EOS. The train/val split is
// a pure function of a document's text (a hash below val_fraction goes to val), so it does
// not depend on file order and duplicated documents never straddle the split.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zaya {

struct PrepareProgress {
  uint64_t bytes_read = 0, total_bytes = 0;  // of the input files
  uint64_t tokens = 0;                       // written so far, train + val
  double seconds = 0;                        // since the start
};

struct PrepareOptions {
  std::vector<std::string> inputs;  // raw UTF-8 text files
  std::string out_dir;
  std::string tokenizer;            // an existing .model to use; empty: train one
  SentencePieceTrainOptions train;  // when training (vocab_size, model_type, ...)
  double val_fraction = 0.01;
  uint64_t max_tokens = 0;                  // stop after this many tokens (train + val); 0: all
  uint64_t shard_tokens = uint64_t(1) << 27;  // tokens per shard file (512 MiB)
  bool document_per_file = false;           // one document per input file, not per blank line
  double progress_seconds = 2.0;            // interval of on_progress calls; <= 0: none
  // The library prints nothing: the caller (zaya prepare) prints these.
  std::function<void(const PrepareProgress&)> on_progress;
  std::function<void(const std::string&)> on_note;  // "tokenizer: trained ...", "removing stale shard ..."
};

struct PrepareSplit {
  uint64_t tokens = 0, documents = 0;
  std::vector<std::string> shards;  // full paths
};

struct PrepareResult {
  std::string tokenizer_path, meta_path;
  int vocab_size = 0;
  PrepareSplit train, val;
  uint64_t bytes_read = 0;
  bool hit_max_tokens = false;
  double seconds = 0;
  double train_unigram_entropy = 0;  // nats/token of the train split under its own unigram
  double val_unigram_cross_entropy = 0;  // nats/token of val under train's unigram (add-one)
};

PrepareResult prepare_corpus(const PrepareOptions& opt);

}  // namespace zaya
