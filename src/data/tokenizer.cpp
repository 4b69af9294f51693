#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/io.h"
#include "core/log.h"
#include "data/hf_tokenizer.h"

namespace zaya {

// ---------------------------------------------------------------- loading and use

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& model_path) {
  ZAYA_CHECK(std::filesystem::is_regular_file(model_path), model_path, ": tokenizer model not found");
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->path_ = model_path;
  t->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = t->sp_->Load(model_path);
  ZAYA_CHECK(st.ok(), model_path, ": cannot load SentencePiece model: ", st.ToString());
  ZAYA_CHECK(t->sp_->GetPieceSize() > 0, model_path, ": SentencePiece model has no pieces");
  return t;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto st = sp_->Encode(text, &ids);
  ZAYA_CHECK(st.ok(), path_, ": encode failed: ", st.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  const int n = vocab_size();
  std::vector<int> v(ids.begin(), ids.end());
  for (size_t i = 0; i < v.size(); ++i)
    ZAYA_CHECK(v[i] >= 0 && v[i] < n, path_, ": cannot decode id ", v[i], " at position ", i,
               ": out of the vocabulary (size ", n, ")");
  std::string out;
  auto st = sp_->Decode(v, &out);
  ZAYA_CHECK(st.ok(), path_, ": decode failed: ", st.ToString());
  return out;
}

int SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }
int SentencePieceTokenizer::eos_id() const { return sp_->eos_id(); }
int SentencePieceTokenizer::pad_id() const { return sp_->pad_id(); }
int SentencePieceTokenizer::unk_id() const { return sp_->unk_id(); }

std::string SentencePieceTokenizer::id_to_piece(int id) const {
  ZAYA_CHECK(id >= 0 && id < vocab_size(), path_, ": piece id ", id, " out of range [0, ", vocab_size(), ")");
  return sp_->IdToPiece(id);
}

int SentencePieceTokenizer::piece_to_id(std::string_view piece) const {
  int id = sp_->PieceToId(piece);
  if (id == sp_->unk_id() && sp_->IdToPiece(id) != piece) return -1;
  return id;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  ZAYA_CHECK(std::filesystem::is_regular_file(path), path, ": tokenizer file not found");
  if (is_tokenizer_json(path)) return HfTokenizer::load(path);
  return SentencePieceTokenizer::load(path);
}

// ---------------------------------------------------------------- training

namespace {

// Feeds SentencePiece the non-blank lines a callback yields, up to a byte budget.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  LineIterator(const std::function<bool(std::string&)>& next, uint64_t max_bytes) : next_(next), max_bytes_(max_bytes) {
    Next();
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }
  void Next() override {
    while (!done_) {
      if (bytes_ >= max_bytes_ || !next_(line_)) {
        done_ = true;
        return;
      }
      bytes_ += line_.size() + 1;
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      if (line_.find_first_not_of(" \t") != std::string::npos) return;
    }
  }
  uint64_t bytes() const { return bytes_; }

 private:
  const std::function<bool(std::string&)>& next_;
  uint64_t max_bytes_, bytes_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

uint64_t train_sentencepiece(const std::vector<std::string>& input_files, const std::string& model_path,
                             const SentencePieceTrainOptions& opt) {
  ZAYA_CHECK(!input_files.empty(), "tokenizer training: no input files");
  for (const auto& f : input_files)
    ZAYA_CHECK(std::filesystem::is_regular_file(f), f, ": tokenizer training input not found");
  size_t file = 0;
  std::ifstream in;
  std::function<bool(std::string&)> next = [&](std::string& line) {
    while (file < input_files.size()) {
      if (!in.is_open()) {
        in.open(input_files[file]);
        ZAYA_CHECK(in.is_open(), input_files[file], ": cannot open tokenizer training input");
      }
      if (std::getline(in, line)) return true;
      in.close();
      in.clear();
      ++file;
    }
    return false;
  };
  return train_sentencepiece(next, model_path, opt);
}

uint64_t train_sentencepiece(const std::function<bool(std::string& line)>& next, const std::string& model_path,
                             const SentencePieceTrainOptions& opt) {
  ZAYA_CHECK(opt.model_type == "bpe" || opt.model_type == "unigram", "tokenizer model_type \"", opt.model_type,
             "\": must be bpe or unigram");
  ZAYA_CHECK(opt.vocab_size >= 16, "tokenizer vocab_size ", opt.vocab_size, ": too small");
  ZAYA_CHECK(!opt.byte_fallback || opt.vocab_size > 256 + 5, "tokenizer vocab_size ", opt.vocab_size,
             ": byte fallback needs more than 261 (256 byte pieces + specials)");
  ZAYA_CHECK(opt.character_coverage > 0 && opt.character_coverage <= 1, "tokenizer character_coverage ",
             opt.character_coverage, ": must be in (0, 1]");
  int threads = opt.threads > 0 ? opt.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, 16);

  std::unordered_map<std::string, std::string> args = {
      {"model_type", opt.model_type},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"character_coverage", cat(opt.character_coverage)},
      {"byte_fallback", opt.byte_fallback ? "true" : "false"},
      {"input_sentence_size", std::to_string(opt.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"num_threads", std::to_string(threads)},
      // Gemma's conventions: pad 0, eos 1, bos 2, unk 3; raw text, digits split.
      {"pad_id", "0"},
      {"eos_id", "1"},
      {"bos_id", "2"},
      {"unk_id", "3"},
      {"pad_piece", "<pad>"},
      {"eos_piece", "<eos>"},
      {"bos_piece", "<bos>"},
      {"unk_piece", "<unk>"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},  // newlines inside documents get a piece of their own
      {"minloglevel", log_level() >= LogLevel::Debug ? "0" : "1"},
  };
  sentencepiece::SetRandomGeneratorSeed(opt.seed);
  LineIterator it(next, opt.max_input_bytes);
  std::string model;
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  ZAYA_CHECK(st.ok(), model_path, ": SentencePiece training failed: ", st.ToString());
  ZAYA_CHECK(!model.empty(), model_path, ": SentencePiece training produced no model");
  write_file_atomic(model_path, model);
  return it.bytes();
}

}  // namespace zaya
