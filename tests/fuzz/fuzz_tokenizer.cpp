// libFuzzer target: tokenizer.json and tokenizer_config.json (src/data/hf_tokenizer*.cpp:
// HfTokenizer::from_json / load; src/ckpt/tokenizer_files.cpp: is_tokenizer_json,
// tokenizer_files). The input is
//   tokenizer.json [ ==== tokenizer_config.json [ ==== text ] ]
// A tokenizer that loads then encodes the text (with and without specials), decodes the
// result, and decodes the text's bytes taken as ids (mostly out of range: refused).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/tokenizer_files.h"
#include "fuzz_util.h"
#include "data/hf_tokenizer.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = zaya_fuzz::split(data, size, 3);
  const std::string_view tj = parts[0];
  const std::string_view cj = parts.size() > 1 ? parts[1] : std::string_view();
  const std::string_view text = parts.size() > 2 ? parts[2] : std::string_view("Hello world, <b>x</b> \xe2\x96\x81 \xff!");
  ZAYA_FUZZ_EXPECT_ERRORS({
    auto t = zaya::HfTokenizer::from_json("tokenizer.json", tj, cj);
    const std::vector<int32_t> ids = t->encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= t->vocab_size()) __builtin_trap();  // encode must stay in the vocabulary
    ZAYA_FUZZ_EXPECT_ERRORS((void)t->decode(ids));
    ZAYA_FUZZ_EXPECT_ERRORS((void)t->encode_with_specials(text));
    std::vector<int32_t> raw(text.size() / 4);
    if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
    ZAYA_FUZZ_EXPECT_ERRORS((void)t->decode(raw));
    for (int id : {t->bos_id(), t->eos_id(), t->pad_id(), t->unk_id(), 0, t->vocab_size() - 1, t->vocab_size()})
      ZAYA_FUZZ_EXPECT_ERRORS((void)t->piece_to_id(t->id_to_piece(id)));
    (void)t->document_prefix();
  });
  // The file route, now and then (it costs file writes): load() with the config beside it.
  if (size % 8 == 0) {
    zaya_fuzz::clear();
    const std::string p = zaya_fuzz::write_file("tokenizer.json", tj);
    if (!cj.empty()) zaya_fuzz::write_file("tokenizer_config.json", cj);
    ZAYA_FUZZ_EXPECT_ERRORS({
      (void)zaya::is_tokenizer_json(p);
      (void)zaya::tokenizer_files(p);
      (void)zaya::find_model_tokenizer(zaya_fuzz::scratch());
      (void)zaya::HfTokenizer::load(p);
    });
  }
  return 0;
}
