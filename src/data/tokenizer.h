// Tokenizers: an abstract interface (the Hugging Face tokenizer.json implementation is in
// hf_tokenizer.h) and a SentencePiece implementation that trains a model on raw text or loads
// an existing .model file (Gemma's tokenizer.model included).
//
// Special ids of models trained here follow Gemma's layout: pad=0, eos=1, bos=2, unk=3.
// Text is not normalised (identity), whitespace is kept as is, no dummy prefix is added and
// byte fallback is on, so decode(encode(text)) == text for any UTF-8 text.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/tokenizer_files.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace zaya {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when the model has none
  virtual int eos_id() const = 0;
  virtual int pad_id() const = 0;
  virtual int unk_id() const = 0;
  virtual std::string id_to_piece(int id) const = 0;       // error when id is out of range
  virtual int piece_to_id(std::string_view piece) const = 0;  // -1 when the piece is unknown
  virtual std::string kind() const = 0;                      // "sentencepiece", ...
  virtual std::string path() const = 0;                      // the file it was loaded from
  // The ids a document starts with, before its text. Models trained here see an EOS between
  // documents; a tokenizer.json model starts with the BOS its config adds (add_bos_token).
  virtual std::vector<int32_t> document_prefix() const {
    return eos_id() >= 0 ? std::vector<int32_t>{eos_id()} : std::vector<int32_t>{};
  }
};

struct SentencePieceTrainOptions {
  int vocab_size = 8000;
  std::string model_type = "bpe";     // "bpe" or "unigram"
  double character_coverage = 0.9995;  // 1.0 for small alphabets; byte fallback covers the rest
  bool byte_fallback = true;
  uint64_t max_sentences = 2'000'000;   // sentences (lines) sampled for training
  uint64_t max_input_bytes = 512ull << 20;  // stop reading the inputs after this much text
  int threads = 0;                      // 0: all hardware threads (at most 16)
  uint32_t seed = 1;                    // the sampling/shuffling seed SentencePiece uses
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads a serialized SentencePiece model (.model file).
  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override;
  int bos_id() const override;
  int eos_id() const override;
  int pad_id() const override;
  int unk_id() const override;
  std::string id_to_piece(int id) const override;
  int piece_to_id(std::string_view piece) const override;
  std::string kind() const override { return "sentencepiece"; }
  std::string path() const override { return path_; }

 private:
  SentencePieceTokenizer() = default;
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// Trains a SentencePiece model on the lines of the given text files (blank lines skipped)
// and writes it to model_path (atomically). Errors name the input file or the option.
// Returns the bytes of text it trained on.
uint64_t train_sentencepiece(const std::vector<std::string>& input_files, const std::string& model_path,
                             const SentencePieceTrainOptions& opt);
// The same on lines from a callback (`zaya prepare` feeds its documents' lines: JSON lines and
// compressed corpora): next(line) fills the next line and returns false at the end. Blank
// lines are skipped here too, and reading stops at opt.max_input_bytes.
uint64_t train_sentencepiece(const std::function<bool(std::string& line)>& next, const std::string& model_path,
                             const SentencePieceTrainOptions& opt);

// Opens a tokenizer by file: a Hugging Face tokenizer.json (recognised by its content, a
// JSON object, whatever the file's name; see hf_tokenizer.h) or a SentencePiece .model.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Finding a model directory's tokenizer and the files to copy with it: ckpt/tokenizer_files.h.

}  // namespace zaya
