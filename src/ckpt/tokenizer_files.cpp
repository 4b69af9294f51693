#include "ckpt/tokenizer_files.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace zaya {

namespace fs = std::filesystem;

bool is_tokenizer_json(const std::string& path) {
  // A serialized SentencePiece model starts with a protobuf tag (0x0a); tokenizer.json with '{'.
  std::ifstream f(path, std::ios::binary);
  char c = 0;
  while (f.get(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
  }
  return f && c == '{';
}

std::string find_model_tokenizer(const std::string& dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& path) {
  ZAYA_CHECK(fs::is_regular_file(path), path, ": tokenizer file not found");
  if (!is_tokenizer_json(path)) return {{path, "tokenizer.model"}};
  std::vector<std::pair<std::string, std::string>> files{{path, "tokenizer.json"}};
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config)) files.emplace_back(config.string(), "tokenizer_config.json");
  return files;
}

}  // namespace zaya
