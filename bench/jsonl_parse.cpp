// Why zaya prepare parses JSON lines with simdjson: the text field of every line of a JSON
// lines file taken out by simdjson's DOM parser (data/document.h, what prepare runs) and by
// nlohmann::json, one thread, median of several alternated rounds.
//
//   bench_jsonl_parse [FILE.jsonl] [--rounds N] [--record PATH]
//
// Without FILE it builds 64 MB of FineWeb-like lines (long paragraphs of words, a URL, a few
// metadata fields). --record writes a JSON record (command, CPU model and flags, threads,
// figures) for bench/results/.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/document.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string synthetic_corpus(size_t bytes) {
  static const char* words[] = {"the", "of", "pretraining", "and", "model", "experts", "router", "données",
                                "über", "token", "attention", "a", "to", "in", "is", "\\\"quoted\\\"", "line\\nbreak"};
  std::string out;
  uint64_t x = 88172645463325252ull;
  for (size_t doc = 0; out.size() < bytes; ++doc) {
    std::string text;
    size_t n = 200 + (doc * 37) % 1500;
    for (size_t i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      text += words[x % (sizeof words / sizeof *words)];
      text += (x >> 20) % 17 == 0 ? ". " : " ";
    }
    char head[160];
    std::snprintf(head, sizeof head, "{\"id\":\"<urn:uuid:%zu>\",\"url\":\"https://example.org/%zu\",\"score\":%.3f,\"text\":\"",
                  doc, doc * 7, double(doc % 1000) / 1000);
    out += head;
    out += text;
    out += "\",\"language\":\"en\",\"token_count\":";
    out += std::to_string(n);
    out += "}\n";
  }
  return out;
}

std::string cpu_field(const char* key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      size_t c = line.find(':');
      return c == std::string::npos ? "" : line.substr(c + 2);
    }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string file, record;
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
      else if (!std::strcmp(argv[i], "--record") && i + 1 < argc) record = argv[++i];
      else file = argv[i];
    }
    std::string corpus;
    if (file.empty()) {
      corpus = synthetic_corpus(size_t(64) << 20);
    } else {
      std::ifstream in(file, std::ios::binary);
      ZAYA_CHECK(in, file, ": cannot open");
      std::stringstream ss;
      ss << in.rdbuf();
      corpus = ss.str();
    }
    std::vector<std::string_view> lines;
    for (size_t s = 0; s < corpus.size();) {
      size_t e = corpus.find('\n', s);
      if (e == std::string::npos) e = corpus.size();
      if (e > s) lines.push_back(std::string_view(corpus).substr(s, e - s));
      s = e + 1;
    }
    const double mb = double(corpus.size()) / 1e6;
    const zaya::TextKey key = zaya::parse_text_key("text");
    zaya::JsonTextExtractor simd;
    std::string text;
    auto run_simdjson = [&] {
      size_t chars = 0;
      for (auto l : lines) {
        ZAYA_CHECK(simd.extract(l, key, text).empty(), "simdjson: a line failed");
        chars += text.size();
      }
      return chars;
    };
    auto run_nlohmann = [&] {
      size_t chars = 0;
      for (auto l : lines) chars += nlohmann::json::parse(l).at("text").get_ref<const std::string&>().size();
      return chars;
    };
    std::vector<double> ts, tn;
    for (int r = 0; r < rounds; ++r) {  // alternated, so both see the same machine
      double t0 = now();
      size_t a = run_simdjson();
      double t1 = now();
      size_t b = run_nlohmann();
      double t2 = now();
      ZAYA_CHECK(a == b, "the two parsers disagree on the text: ", a, " against ", b, " bytes");
      ts.push_back(t1 - t0);
      tn.push_back(t2 - t1);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double simd_mbs = mb / median(ts), nl_mbs = mb / median(tn);
    std::printf("corpus    %s: %.1f MB, %zu lines\n", file.empty() ? "synthetic FineWeb-like" : file.c_str(), mb,
                lines.size());
    std::printf("simdjson  %.0f MB/s (DOM parse + text key, one thread, median of %d)\n", simd_mbs, rounds);
    std::printf("nlohmann  %.0f MB/s\n", nl_mbs);
    std::printf("ratio     simdjson at %.1fx nlohmann\n", simd_mbs / nl_mbs);
    if (!record.empty()) {
      std::string cmd;
      for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
      nlohmann::json j = {{"benchmark", "jsonl_parse"},
                          {"command", cmd},
                          {"cpu_model", cpu_field("model name")},
                          {"cpu_flags", cpu_field("flags")},
                          {"threads", 1},
                          {"load_average", [] {
                             std::ifstream in("/proc/loadavg");
                             double l = 0;
                             in >> l;
                             return l;
                           }()},
                          {"corpus", file.empty() ? "synthetic FineWeb-like" : file},
                          {"corpus_mb", mb},
                          {"rounds", rounds},
                          {"figures", {{"simdjson_mb_s", simd_mbs}, {"nlohmann_mb_s", nl_mbs}, {"ratio", simd_mbs / nl_mbs}}}};
      std::ofstream(record) << j.dump(2) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_jsonl_parse: %s\n", e.what());
    return 1;
  }
}
