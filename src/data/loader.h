// The training data loader: mixes several token sources with per-phase weights and packs
// sequences of T+1 tokens (inputs t[0..T-1], targets t[1..T]).
//
// Sources. A source is either zaya token shards (data/shard.h) or a Megatron-LM indexed
// dataset (data/megatron.h), memory-mapped where it lies; either one is read as one token
// stream, and everything below works the same over both.
//
// Sampling. Every sample has a GLOBAL index g = 0, 1, 2, ... For each g the loader draws the
// source from the mixing stream (one uniform per sample, Philox keyed by the seed), then
// takes that source's next window. A source is the concatenation of its shards; an epoch of
// it is laid out as windows of T+1 tokens at stride T starting at a random offset in [0, T),
// visited in a random order (a keyed bijection, so no permutation is stored). When the
// windows run out the source starts its next epoch with a new offset and order.
//
// Data parallelism. next_batch(GB, r, W) consumes global samples [g, g + GB) on every rank
// (all ranks walk the same draws, so their states stay identical) and returns to rank r the
// samples [g + r*GB/W, g + (r+1)*GB/W). The global sample order is thus the same whatever
// the DP degree: W=1 returns exactly the concatenation of the W=2 ranks' rows. Call it once
// per optimizer step with the global batch and split micro-batches locally.
//
// State (state()/load_state()): the global sample counter, the mixing RNG (key, counter),
// the phase (weights, T) and per source the epoch, the cursor inside the epoch, the window
// length the epoch was laid out for, and the samples drawn. Restoring it in a fresh loader
// over the same shards continues with exactly the same batches.
//
// Phases. set_phase(weights, T) changes the mixture at once; a source whose current epoch
// was laid out for another T starts a new epoch at its next draw.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/megatron.h"
#include "data/shard.h"

namespace zaya {

struct DataSource {
  std::string name;                 // for messages and state; "source<i>" when empty
  std::vector<std::string> shards;  // token shard files, concatenated in this order
  std::string megatron = {};        // or: a Megatron dataset PREFIX (PREFIX.bin + PREFIX.idx)
};

// A source's shards, or its Megatron dataset, read as one token stream. All shards must
// share one vocab size. A Megatron index records no vocabulary: its stream takes the
// vocab_limit it is opened with (the model's vocab_size) as its vocab size, and every read
// checks its tokens against it.
class TokenStream {
 public:
  TokenStream(std::string name, const std::vector<std::string>& shard_paths, bool check_tokens = false);
  // check_tokens: scan every token against vocab_limit on open (reads check them anyway).
  static TokenStream megatron(std::string name, const std::string& prefix, uint32_t vocab_limit,
                              bool check_tokens = false);
  const std::string& name() const { return name_; }
  uint64_t size() const { return total_; }
  uint32_t vocab_size() const { return vocab_; }
  const std::vector<ShardReader>& shards() const { return shards_; }
  const MegatronDataset* megatron_dataset() const { return megatron_.get(); }
  // The file to name in messages: the first shard, or the Megatron .idx.
  std::string first_path() const;
  // Copies tokens [pos, pos + n) into out; error when the range passes the end.
  void read(uint64_t pos, uint64_t n, int32_t* out) const;

 private:
  TokenStream() = default;
  std::string name_;
  std::vector<ShardReader> shards_;
  std::unique_ptr<MegatronDataset> megatron_;
  std::vector<uint64_t> starts_;  // first global position of each shard
  uint64_t total_ = 0;
  uint32_t vocab_ = 0;
};

class DataLoader {
 public:
  // check_tokens: scan every token of every source against the vocab size on open.
  // vocab_limit: the vocabulary Megatron sources are checked against (the model's
  // vocab_size); required when a source is one.
  DataLoader(std::vector<DataSource> sources, uint64_t seed, bool check_tokens = false, uint32_t vocab_limit = 0);

  // weights: one per source, >= 0, not all zero (normalised here); seq_len: T >= 1.
  void set_phase(std::vector<double> weights, int seq_len);
  // Fills tokens with (global_batch / world) rows of seq_len + 1 tokens: this rank's slice
  // of the next global batch. global_batch must be a multiple of world.
  void next_batch(int global_batch, int rank, int world, std::vector<int32_t>& tokens);

  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

  int num_sources() const { return int(streams_.size()); }
  const TokenStream& source(int i) const { return streams_.at(size_t(i)); }
  uint32_t vocab_size() const { return vocab_; }
  int seq_len() const { return seq_len_; }
  const std::vector<double>& weights() const { return weights_; }
  uint64_t global_sample() const { return global_sample_; }
  uint64_t samples_from(int source) const { return cursors_.at(size_t(source)).samples; }
  uint64_t epoch_of(int source) const { return cursors_.at(size_t(source)).epoch; }

 private:
  struct Cursor {
    uint64_t epoch = 0, cursor = 0, window_len = 0, samples = 0;
  };
  int pick_source(double u) const;
  void take_window(int s, int32_t* out);  // out may be null: advance only

  std::vector<TokenStream> streams_;
  std::vector<Cursor> cursors_;
  uint64_t seed_;
  uint32_t vocab_ = 0;
  std::vector<double> weights_, cumulative_;
  int seq_len_ = 0;
  uint64_t global_sample_ = 0;
  uint64_t mix_key_ = 0, mix_counter_ = 0;
};

// Opens a source's stream (shards or Megatron dataset) under `name`.
TokenStream open_token_stream(const DataSource& source, std::string name, uint32_t vocab_limit = 0,
                              bool check_tokens = false);

// Validation windows: non-overlapping windows of T+1 tokens at stride T from the start of
// the stream, in order (the same ones for every run and every DP degree).
uint64_t num_eval_windows(const TokenStream& stream, int seq_len);
void eval_window(const TokenStream& stream, int seq_len, uint64_t index, int32_t* out);

// A keyed bijection of [0, n): a 4-round Feistel network with cycle walking.
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key);

}  // namespace zaya
