// libFuzzer target: corpus files as zaya prepare reads them (src/data/byte_source.cpp: gzip and
// zstd streams, lines of any length; src/data/corpus.cpp: JSON lines and plain-text
// documents; src/data/document.cpp: the JSON parse, the dotted text key, UTF-8 repair).
// The first input byte picks the file kind (jsonl, jsonl.gz, jsonl.zst, txt, txt.gz) and the
// text key ("text" or "meta.content"); the rest is the file's bytes.
#include <cstdint>
#include <string>

#include "data/corpus.h"
#include "data/document.h"
#include "fuzz_util.h"

static zaya_fuzz::ScratchGuard guard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* names[] = {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst", "c.txt", "c.txt.gz", "c.json"};
  const uint8_t pick = data[0];
  const std::string file = zaya_fuzz::write_file(names[pick % 6], std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  const zaya::TextKey key = zaya::parse_text_key(pick & 0x80 ? "meta.content" : "text");
  ZAYA_FUZZ_EXPECT_ERRORS({
    zaya::CorpusReader reader(zaya::expand_corpus_inputs({file}), {bool(pick & 0x40), key.dotted});
    zaya::JsonTextExtractor json;
    zaya::RawRecord rec;
    std::string text;
    while (reader.next(rec)) {
      zaya::repair_utf8(rec.text);
      if (rec.json && json.extract(rec.text, key, text).empty()) {
        zaya::repair_utf8(text);
        (void)zaya::hash_document(text);
      }
      (void)reader.where(rec);
      (void)reader.bytes_read();
    }
  });
  return 0;
}
