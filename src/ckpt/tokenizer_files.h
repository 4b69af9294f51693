// A tokenizer as files on disk, for everything that stores or finds one (prepare's data
// directory, checkpoints, HF directories): which file a directory's tokenizer is, and which
// files travel with it. Reading it is data/tokenizer.h's business.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace zaya {

// A Hugging Face tokenizer.json (a JSON object) rather than a SentencePiece model (a
// protobuf), by content, whatever the file is called.
bool is_tokenizer_json(const std::string& path);

// A model directory's own tokenizer: tokenizer.json if present, else tokenizer.model;
// empty when it has neither.
std::string find_model_tokenizer(const std::string& dir);

// The files a tokenizer is, to copy along with it, as {source path, name to give it}: a
// SentencePiece model as tokenizer.model; a tokenizer.json (whatever its file name) as
// tokenizer.json plus the tokenizer_config.json beside it when there is one (bos/eos).
std::vector<std::pair<std::string, std::string>> tokenizer_files(const std::string& path);

}  // namespace zaya
