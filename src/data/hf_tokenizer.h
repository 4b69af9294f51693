// Hugging Face tokenizer.json (the "tokenizers" library's format), as Gemma3 ships it:
// a BPE model with byte fallback, added and special tokens matched on the raw text before
// anything else, then the declared normalizer, pre-tokenizer and BPE; decoding runs the
// declared decoder chain. tokenizer_config.json next to the file (when present) names the
// bos / eos / pad / unk tokens and whether bos / eos are added (add_bos_token, add_eos_token).
//
// Supported components (anything else is refused with an error naming the file and field):
//   normalizer     null, Replace (String pattern), Prepend, Sequence of these
//   pre_tokenizer  null, Split (String pattern, not inverted; any behavior), Sequence
//   model          BPE (merges as "a b" strings or [a, b] pairs, byte_fallback, unk_token)
//   decoder        null, Replace (String pattern), ByteFallback, Fuse, Strip, Sequence
//   post_processor TemplateProcessing (only to learn the bos / eos tokens it adds)
// Encoding is linear in practice: chunks are cut into words at positions no merge can
// span (computed from the merges at load time), words are BPE'd with a pair-rank hash map
// and cached per thread, long words use a heap over a linked list of symbols.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace zaya {

class HfTokenizer final : public Tokenizer {
 public:
  // Loads tokenizer.json; reads tokenizer_config.json from the same directory if present.
  static std::unique_ptr<HfTokenizer> load(const std::string& json_path);
  // Builds from the JSON texts (config may be empty); `path` names the source in errors.
  static std::unique_ptr<HfTokenizer> from_json(const std::string& path, std::string_view tokenizer_json,
                                                std::string_view config_json = {});
  ~HfTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;  // no bos / eos
  // encode() with the bos / eos the config asks for (add_bos_token, add_eos_token).
  std::vector<int32_t> encode_with_specials(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override;
  int bos_id() const override;
  int eos_id() const override;
  int pad_id() const override;
  int unk_id() const override;
  std::string id_to_piece(int id) const override;
  int piece_to_id(std::string_view piece) const override;
  std::string kind() const override { return "tokenizer.json"; }
  std::string path() const override;
  bool adds_bos() const;
  std::vector<int32_t> document_prefix() const override;  // {bos} when the config adds it
  bool adds_eos() const;

  struct Impl;

 private:
  HfTokenizer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya
