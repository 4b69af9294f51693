// Where `zaya prepare` writes: a hidden staging directory inside the output directory
// (OUT/.prepare-PID), the split writers (token shards or a Megatron dataset) that fill it, and
// the commit that moves the outputs into OUT, meta.json last.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zaya {

// One split's documents (their tokens with EOS) into files in the staging directory.
class SplitWriter {
 public:
  virtual ~SplitWriter() = default;
  virtual void add_document(std::span<const uint32_t> tokens) = 0;
  // Finishes the files; returns their paths in the staging directory.
  virtual std::vector<std::string> finish() = 0;
};

// format "shards": NAME_000.bin, ... of at most shard_tokens tokens each (a split with no
// tokens still gets an empty NAME_000.bin); "megatron": NAME_text_document.bin / .idx.
std::unique_ptr<SplitWriter> make_split_writer(const std::string& format, const std::string& dir,
                                               const std::string& name, uint32_t vocab, uint64_t shard_tokens);

class PrepareStaging {
 public:
  // Makes OUT (if needed) and OUT/.prepare-PID; removes staging directories that killed runs
  // left behind (those whose process is gone).
  explicit PrepareStaging(std::string out_dir);
  // Unless committed: removes the staging directory, and OUT too when this run made it.
  ~PrepareStaging();
  PrepareStaging(const PrepareStaging&) = delete;
  PrepareStaging& operator=(const PrepareStaging&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& out() const { return out_; }
  // Removes OUT/meta.json, moves every staged file into OUT (replacing files of the same name),
  // removes OUT's train/val outputs not among them and tokenizer files of the other kind,
  // writes meta.json (atomically) and removes the staging directory. `note` hears each removal.
  void commit(const std::string& meta_text, const std::function<void(const std::string&)>& note);

 private:
  std::string out_, dir_;
  bool committed_ = false, created_ = false;
};

}  // namespace zaya
