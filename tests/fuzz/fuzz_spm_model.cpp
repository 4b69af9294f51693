// libFuzzer target: SentencePiece .model files (src/data/tokenizer.cpp:
// SentencePieceTokenizer::load, and load_tokenizer's choice between a tokenizer.json and a
// .model). The input is
//   model bytes [ ==== text ]
// A model that loads encodes the text, decodes the result, decodes the text's bytes taken
// as ids (mostly out of range: refused) and maps its special ids to pieces and back.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = zaya_fuzz::split(data, size, 2);
  const std::string_view text = parts.size() > 1 ? parts[1] : std::string_view("Hello world, <b>x</b> \xe2\x96\x81 \xff!");
  const std::string p = zaya_fuzz::write_file("tokenizer.model", parts[0]);
  ZAYA_FUZZ_EXPECT_ERRORS({
    std::unique_ptr<zaya::Tokenizer> t;
    if (size & 1) t = zaya::load_tokenizer(p);
    else t = zaya::SentencePieceTokenizer::load(p);
    const std::vector<int32_t> ids = t->encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= t->vocab_size()) __builtin_trap();  // encode must stay in the vocabulary
    ZAYA_FUZZ_EXPECT_ERRORS((void)t->decode(ids));
    std::vector<int32_t> raw(text.size() / 4);
    if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
    ZAYA_FUZZ_EXPECT_ERRORS((void)t->decode(raw));
    for (int id : {t->bos_id(), t->eos_id(), t->pad_id(), t->unk_id(), 0, t->vocab_size() - 1, t->vocab_size()})
      ZAYA_FUZZ_EXPECT_ERRORS((void)t->piece_to_id(t->id_to_piece(id)));
    (void)t->document_prefix();
  });
  return 0;
}
