// zaya tokenize --tokenizer F (--text FILE | --jsonl FILE) [--decode] [--add-special]:
// encodes a text file into token ids (or decodes ids back into text) with a tokenizer.json,
// a SentencePiece .model or a model directory's own tokenizer.
//   --text FILE    the whole file is one text; ids are printed space-separated on one line
//                  (with --decode: FILE holds ids, the raw text is printed)
//   --jsonl FILE   one JSON string per line -> one JSON list of ids per line
//                  (with --decode: one JSON list of ids per line -> one JSON string per line)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/timer.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"

namespace {

struct Opts {
  std::string tokenizer, text, jsonl;
  bool decode = false, add_special = false;
};

std::vector<int32_t> encode(const zaya::Tokenizer& t, std::string_view s, bool add_special) {
  if (add_special)
    if (auto* hf = dynamic_cast<const zaya::HfTokenizer*>(&t)) return hf->encode_with_specials(s);
  return t.encode(s);
}

std::vector<int32_t> parse_ids(const std::string& where, const nlohmann::json& j) {
  if (!j.is_array()) zaya::fail(where, ": expected a JSON list of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer()) zaya::fail(where, ": ", v.dump(), " is not a token id");
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

void run(const Opts& o) {
  if (o.text.empty() == o.jsonl.empty()) zaya::fail("give exactly one of --text FILE or --jsonl FILE");
  std::string tok_path = o.tokenizer;
  if (std::filesystem::is_directory(tok_path)) {
    tok_path = zaya::find_model_tokenizer(o.tokenizer);
    if (tok_path.empty()) zaya::fail(o.tokenizer, ": no tokenizer.json or tokenizer.model there");
  }
  zaya::Timer load_timer;
  auto tok = zaya::load_tokenizer(tok_path);
  const double load_s = load_timer.seconds();
  const std::string in_path = o.text.empty() ? o.jsonl : o.text;
  std::error_code ec;
  if (std::filesystem::is_directory(in_path, ec)) zaya::fail(in_path, ": is a directory, not a text file");
  std::ifstream f(in_path, std::ios::binary);
  if (!f) zaya::fail(in_path, ": cannot open");
  size_t bytes = 0, tokens = 0;
  zaya::Timer timer;
  if (!o.text.empty()) {
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    if (o.decode) {
      std::vector<int32_t> ids;
      std::istringstream in(s);
      std::string w;
      while (in >> w) {
        char* end = nullptr;
        const long v = std::strtol(w.c_str(), &end, 10);
        if (*end || v < 0 || v > INT32_MAX) zaya::fail(in_path, ": '", w, "' is not a token id");
        ids.push_back(int32_t(v));
      }
      const std::string text = tok->decode(ids);
      std::fwrite(text.data(), 1, text.size(), stdout);
      bytes = text.size(), tokens = ids.size();
    } else {
      const std::vector<int32_t> ids = encode(*tok, s, o.add_special);
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", line.c_str());
      bytes = s.size(), tokens = ids.size();
    }
  } else {
    std::string line;
    for (size_t n = 1; std::getline(f, line); ++n) {
      const std::string where = zaya::cat(in_path, ":", n);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        zaya::fail(where, ": not valid JSON: ", e.what());
      }
      if (o.decode) {
        const std::vector<int32_t> ids = parse_ids(where, j);
        const std::string text = tok->decode(ids);
        // Invalid UTF-8 (a partial character) is written as U+FFFD here.
        std::printf("%s\n", nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        bytes += text.size(), tokens += ids.size();
      } else {
        if (!j.is_string()) zaya::fail(where, ": expected a JSON string");
        const std::string s = j.get<std::string>();
        const nlohmann::json ids = encode(*tok, s, o.add_special);
        std::printf("%s\n", ids.dump().c_str());
        bytes += s.size(), tokens += ids.size();
      }
    }
  }
  const double secs = timer.seconds();
  std::fprintf(stderr, "[tokenize] %s (%s, vocab %d, loaded in %.2f s): %zu bytes %s %zu tokens in %.3f s\n",
               tok_path.c_str(), tok->kind().c_str(), tok->vocab_size(), load_s, bytes, o.decode ? "<-" : "->",
               tokens, secs);
}

}  // namespace

ZAYA_COMMAND("tokenize", "Encode a text file into token ids, or decode ids into text", [](CLI::App& app) {
  auto o = std::make_shared<Opts>();
  app.add_option("--tokenizer", o->tokenizer, "tokenizer.json, SentencePiece .model, or a model directory")
      ->required();
  app.add_option("--text", o->text, "a text file (one text); with --decode: a file of token ids");
  app.add_option("--jsonl", o->jsonl, "one JSON string per line (with --decode: one JSON list of ids per line)");
  app.add_flag("--decode", o->decode, "decode ids into text");
  app.add_flag("--add-special", o->add_special, "add the bos / eos the tokenizer config asks for");
  app.callback([o] { run(*o); });
});
