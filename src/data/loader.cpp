#include "data/loader.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"

namespace zaya {

// ---------------------------------------------------------------- permutation

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key) {
  ZAYA_CHECK(i < n, "permute_index: index ", i, " out of [0, ", n, ")");
  if (n <= 1) return 0;
  const int bits = 64 - std::countl_zero(n - 1);
  const int half = (bits + 1) / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  do {  // cycle walking: the Feistel domain [0, 4^half) is < 4n; re-encrypt until inside [0, n)
    uint64_t l = i >> half, r = i & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = splitmix64(key ^ splitmix64(r + (round << 56))) & mask;
      uint64_t t = l ^ f;
      l = r;
      r = t;
    }
    i = (l << half) | r;
  } while (i >= n);
  return i;
}

// ---------------------------------------------------------------- token stream

TokenStream::TokenStream(std::string name, const std::vector<std::string>& shard_paths, bool check_tokens)
    : name_(std::move(name)) {
  ZAYA_CHECK(!shard_paths.empty(), "data source \"", name_, "\": no shard files");
  for (const auto& p : shard_paths) {
    ShardReader r(p);
    if (vocab_ == 0) vocab_ = r.vocab_size();
    ZAYA_CHECK(r.vocab_size() == vocab_, p, ": vocab size ", r.vocab_size(), " differs from ", vocab_, " of ",
               shard_paths.front(), " (data source \"", name_, "\")");
    if (check_tokens) r.check_tokens();
    starts_.push_back(total_);
    total_ += r.size();
    shards_.push_back(std::move(r));
  }
}

TokenStream TokenStream::megatron(std::string name, const std::string& prefix, uint32_t vocab_limit,
                                  bool check_tokens) {
  ZAYA_CHECK(vocab_limit > 0, "data source \"", name, "\": the Megatron dataset ", prefix,
             " records no vocabulary, so the loader needs the model's vocab_size to check its tokens");
  TokenStream s;
  s.name_ = std::move(name);
  s.megatron_ = std::make_unique<MegatronDataset>(prefix);
  if (check_tokens) s.megatron_->check_tokens(vocab_limit);
  s.total_ = s.megatron_->tokens();
  s.vocab_ = vocab_limit;
  return s;
}

std::string TokenStream::first_path() const {
  if (megatron_) return megatron_->idx_path();
  return shards_.empty() ? std::string() : shards_.front().path();
}

TokenStream open_token_stream(const DataSource& source, std::string name, uint32_t vocab_limit, bool check_tokens) {
  ZAYA_CHECK(source.megatron.empty() || source.shards.empty(), "data source \"", name,
             "\": give shards or a Megatron dataset, not both");
  if (!source.megatron.empty()) return TokenStream::megatron(std::move(name), source.megatron, vocab_limit, check_tokens);
  return TokenStream(std::move(name), source.shards, check_tokens);
}

void TokenStream::read(uint64_t pos, uint64_t n, int32_t* out) const {
  ZAYA_CHECK(pos <= total_ && n <= total_ - pos, "data source \"", name_, "\": read of ", n, " tokens at ", pos,
             " passes its end (", total_, " tokens)");
  if (n == 0) return;
  if (megatron_) return megatron_->read(pos, n, out, vocab_);
  size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
  while (n > 0) {
    auto toks = shards_[k].tokens();
    uint64_t off = pos - starts_[k];
    uint64_t take = std::min<uint64_t>(n, toks.size() - off);
    for (uint64_t j = 0; j < take; ++j) out[j] = int32_t(toks[off + j]);
    out += take;
    pos += take;
    n -= take;
    ++k;
  }
}

uint64_t num_eval_windows(const TokenStream& stream, int seq_len) {
  ZAYA_CHECK(seq_len >= 1, "eval windows: seq_len ", seq_len, " must be >= 1");
  if (stream.size() < uint64_t(seq_len) + 1) return 0;
  return (stream.size() - 1) / uint64_t(seq_len);
}

void eval_window(const TokenStream& stream, int seq_len, uint64_t index, int32_t* out) {
  ZAYA_CHECK(index < num_eval_windows(stream, seq_len), "data source \"", stream.name(), "\": eval window ", index,
             " out of range (", num_eval_windows(stream, seq_len), " windows of ", seq_len + 1, " tokens)");
  stream.read(index * uint64_t(seq_len), uint64_t(seq_len) + 1, out);
}

// ---------------------------------------------------------------- loader

namespace {

uint64_t derive_key(uint64_t seed, std::string_view what, uint64_t a, uint64_t b) {
  return splitmix64(seed ^ splitmix64(hash_name(what) ^ splitmix64(a * 0x9e3779b97f4a7c15ull + b)));
}

}  // namespace

DataLoader::DataLoader(std::vector<DataSource> sources, uint64_t seed, bool check_tokens, uint32_t vocab_limit)
    : seed_(seed) {
  ZAYA_CHECK(!sources.empty(), "data loader: no data sources");
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string name = sources[i].name.empty() ? cat("source", i) : sources[i].name;
    streams_.push_back(open_token_stream(sources[i], name, vocab_limit, check_tokens));
    const TokenStream& s = streams_.back();
    // Shards carry their vocabulary and must agree; a Megatron source is held to vocab_limit.
    if (!s.megatron_dataset()) {
      if (vocab_ == 0) vocab_ = s.vocab_size();
      ZAYA_CHECK(s.vocab_size() == vocab_, s.first_path(), ": vocab size ", s.vocab_size(),
                 " differs from the first data source's ", vocab_);
    }
    ZAYA_CHECK(s.size() > 1, "data source \"", name, "\": only ", s.size(), " tokens");
  }
  if (vocab_ == 0) vocab_ = vocab_limit;  // Megatron sources only
  cursors_.resize(streams_.size());
  mix_key_ = Philox(seed_, hash_name("zaya.loader.mix")).key;
}

void DataLoader::set_phase(std::vector<double> weights, int seq_len) {
  ZAYA_CHECK(weights.size() == streams_.size(), "data mixture: ", weights.size(), " weights for ", streams_.size(),
             " sources");
  ZAYA_CHECK(seq_len >= 1, "data loader: seq_len ", seq_len, " must be >= 1");
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    ZAYA_CHECK(std::isfinite(weights[i]) && weights[i] >= 0, "data mixture: weight ", weights[i], " of source \"",
               streams_[i].name(), "\" must be finite and >= 0");
    sum += weights[i];
  }
  ZAYA_CHECK(sum > 0, "data mixture: all weights are zero");
  for (size_t i = 0; i < weights.size(); ++i)
    ZAYA_CHECK(weights[i] == 0 || streams_[i].size() >= uint64_t(seq_len) + 1, "data source \"", streams_[i].name(),
               "\": ", streams_[i].size(), " tokens, fewer than one sequence of ", seq_len + 1);
  weights_ = std::move(weights);
  cumulative_.assign(weights_.size(), 0);
  double acc = 0;
  for (size_t i = 0; i < weights_.size(); ++i) cumulative_[i] = (acc += weights_[i] / sum);
  seq_len_ = seq_len;
}

int DataLoader::pick_source(double u) const {
  int last = 0;
  for (size_t i = 0; i < cumulative_.size(); ++i) {
    if (weights_[i] <= 0) continue;
    last = int(i);
    if (u < cumulative_[i]) return int(i);
  }
  return last;  // u within rounding of 1
}

void DataLoader::take_window(int s, int32_t* out) {
  const TokenStream& stream = streams_[size_t(s)];
  Cursor& c = cursors_[size_t(s)];
  const uint64_t T = uint64_t(seq_len_), L = T + 1, N = stream.size();
  if (c.window_len != L) {  // first draw, or the phase changed T: lay out a new epoch
    if (c.window_len != 0) ++c.epoch;
    c.cursor = 0;
    c.window_len = L;
  }
  // Epoch layout: windows at offset + i*T, offset in [0, min(T, N - T)) so at least one fits.
  auto windows_of = [&](uint64_t epoch, uint64_t* offset) {
    uint64_t max_offset = std::min(T, N - T);
    *offset = derive_key(seed_, "zaya.loader.offset", uint64_t(s), epoch) % max_offset;
    return (N - *offset - 1) / T;
  };
  uint64_t offset = 0, n = windows_of(c.epoch, &offset);
  if (c.cursor >= n) {
    ++c.epoch;
    c.cursor = 0;
    n = windows_of(c.epoch, &offset);
    log_debug("data source \"", stream.name(), "\": epoch ", c.epoch);
  }
  uint64_t w = permute_index(c.cursor, n, derive_key(seed_, "zaya.loader.order", uint64_t(s), c.epoch));
  if (out) stream.read(offset + w * T, L, out);
  ++c.cursor;
  ++c.samples;
}

void DataLoader::next_batch(int global_batch, int rank, int world, std::vector<int32_t>& tokens) {
  ZAYA_CHECK(seq_len_ > 0, "data loader: set_phase() must be called before next_batch()");
  ZAYA_CHECK(world >= 1 && rank >= 0 && rank < world, "data loader: rank ", rank, " outside a world of ", world);
  ZAYA_CHECK(global_batch >= world && global_batch % world == 0, "data loader: global batch ", global_batch,
             " is not a positive multiple of the data-parallel world size ", world);
  const int local = global_batch / world, first = rank * local;
  const size_t L = size_t(seq_len_) + 1;
  tokens.resize(size_t(local) * L);
  Philox mix;
  mix.key = mix_key_;
  mix.counter = mix_counter_;
  for (int j = 0; j < global_batch; ++j) {
    int s = pick_source(mix.uniform());
    bool mine = j >= first && j < first + local;
    take_window(s, mine ? tokens.data() + size_t(j - first) * L : nullptr);
  }
  mix_counter_ = mix.counter;
  global_sample_ += uint64_t(global_batch);
}

nlohmann::json DataLoader::state() const {
  nlohmann::json srcs = nlohmann::json::array();
  for (size_t i = 0; i < streams_.size(); ++i) {
    const Cursor& c = cursors_[i];
    srcs.push_back({{"name", streams_[i].name()},
                    {"tokens", streams_[i].size()},
                    {"epoch", c.epoch},
                    {"cursor", c.cursor},
                    {"window_len", c.window_len},
                    {"samples", c.samples}});
  }
  return {{"format", "zaya.loader.v1"},
          {"seed", seed_},
          {"global_sample", global_sample_},
          {"seq_len", seq_len_},
          {"weights", weights_},
          {"mix_rng", {{"key", mix_key_}, {"counter", mix_counter_}}},
          {"sources", srcs}};
}

namespace {

uint64_t get_u64_field(const nlohmann::json& j, const char* field, const std::string& where) {
  ZAYA_CHECK(j.is_object() && j.contains(field), "loader state: missing field ", where, field);
  const auto& v = j.at(field);
  ZAYA_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), "loader state: field ",
             where, field, " must be a non-negative integer");
  return v.get<uint64_t>();
}

}  // namespace

void DataLoader::load_state(const nlohmann::json& st) {
  ZAYA_CHECK(st.is_object() && st.value("format", "") == "zaya.loader.v1",
             "loader state: field format must be \"zaya.loader.v1\"");
  ZAYA_CHECK(st.contains("sources") && st["sources"].is_array(), "loader state: missing field sources");
  const auto& srcs = st["sources"];
  ZAYA_CHECK(srcs.size() == streams_.size(), "loader state: ", srcs.size(), " sources saved, ", streams_.size(),
             " configured now");
  std::vector<Cursor> cursors(streams_.size());
  for (size_t i = 0; i < streams_.size(); ++i) {
    const auto& js = srcs[i];
    std::string where = cat("sources[", i, "].");
    std::string name = js.is_object() ? js.value("name", "") : "";
    ZAYA_CHECK(name == streams_[i].name(), "loader state: field ", where, "name is \"", name, "\" but source ", i,
               " is \"", streams_[i].name(), "\" now");
    uint64_t tokens = get_u64_field(js, "tokens", where);
    ZAYA_CHECK(tokens == streams_[i].size(), "loader state: data source \"", name, "\" had ", tokens,
               " tokens when saved but has ", streams_[i].size(), " now");
    cursors[i] = {get_u64_field(js, "epoch", where), get_u64_field(js, "cursor", where),
                  get_u64_field(js, "window_len", where), get_u64_field(js, "samples", where)};
  }
  ZAYA_CHECK(st.contains("mix_rng"), "loader state: missing field mix_rng");
  uint64_t key = get_u64_field(st["mix_rng"], "key", "mix_rng."), counter = get_u64_field(st["mix_rng"], "counter", "mix_rng.");
  uint64_t seed = get_u64_field(st, "seed", ""), global = get_u64_field(st, "global_sample", "");
  ZAYA_CHECK(st.contains("seq_len") && st["seq_len"].is_number_integer(), "loader state: missing field seq_len");
  int seq_len = st["seq_len"].get<int>();
  ZAYA_CHECK(st.contains("weights") && st["weights"].is_array(), "loader state: missing field weights");
  std::vector<double> weights;
  for (const auto& w : st["weights"]) {
    ZAYA_CHECK(w.is_number(), "loader state: field weights must hold numbers");
    weights.push_back(w.get<double>());
  }
  if (seed != seed_) log_warn("loader state: saved seed ", seed, " replaces the configured seed ", seed_);
  if (seq_len > 0 || !weights.empty()) {
    set_phase(weights, seq_len);
  } else {  // saved before any phase was set
    weights_.clear();
    cumulative_.clear();
    seq_len_ = 0;
  }
  seed_ = seed;
  cursors_ = std::move(cursors);
  mix_key_ = key;
  mix_counter_ = counter;
  global_sample_ = global;
}

}  // namespace zaya
