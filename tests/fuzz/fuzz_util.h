// Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp).
//
// Parsers that only take a path are fed through files in one private scratch directory per
// process (under $ZAYA_FUZZ_TMP, else /dev/shm or /tmp): written before the call, removed
// after it. Inputs that stand for several files are cut at kSplit ("\n====\n"; the
// targets' dictionaries hold it, so the fuzzer adds and removes cut points).
#pragma once
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace zaya_fuzz {

inline constexpr std::string_view kSplit = "\n====\n";

// A small valid model config, for targets whose input refers to one (a run TOML, a manifest).
inline constexpr const char* kModelToml = R"(hidden_size = 64
vocab_size = 256
num_attention_heads = 8
cca_num_q_heads = 4
num_query_groups_list = 2
zaya_layers = ["a", 4, "a", 4]
ffn_hidden_size_list = 128
zaya_mlp_expansion = 16
)";

inline std::vector<std::string_view> split(const uint8_t* data, size_t size, size_t max_parts) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_parts) {
    size_t at = s.find(kSplit);
    if (at == std::string_view::npos) break;
    out.push_back(s.substr(0, at));
    s.remove_prefix(at + kSplit.size());
  }
  out.push_back(s);
  return out;
}

// This process's scratch directory (created on first use, emptied by clear()).
inline const std::string& scratch() {
  // Never destroyed: ScratchGuard's destructor may run after a function-local static's.
  static const std::string* dir = [] {
    std::string base;
    if (const char* e = std::getenv("ZAYA_FUZZ_TMP")) base = e;
    else if (access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    else base = "/tmp";
    std::string tmpl = base + "/zaya-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("zaya_fuzz: mkdtemp");
      std::abort();
    }
    return new std::string(tmpl);
  }();
  return *dir;
}

inline std::string path_in(const std::string& name) { return scratch() + "/" + name; }

inline std::string write_file(const std::string& name, std::string_view bytes) {
  const std::string p = path_in(name);
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) {
    std::perror(p.c_str());
    std::abort();
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
  return p;
}

// Removes everything in `dir` (one level of subdirectories, which is all the targets make).
inline void clear_dir(const std::string& dir, bool remove_self = false) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::string p = dir + "/" + n;
      struct stat st {};
      if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) clear_dir(p, true);
      else unlink(p.c_str());
    }
    closedir(d);
  }
  if (remove_self) rmdir(dir.c_str());
}
inline void clear() { clear_dir(scratch()); }

// Removes the scratch directory at exit.
struct ScratchGuard {
  ~ScratchGuard() { clear_dir(scratch(), true); }
};

}  // namespace zaya_fuzz

namespace zaya_fuzz {
// With ZAYA_FUZZ_TRACE=FILE, every error a parser throws is appended to FILE, one line
// each: the replay step (tests/fuzz/run.sh) checks that each regress-* seed still reaches
// the check that fixed its crash (tests/fuzz/regress.tsv), not a guard or an earlier error.
inline void note_error(const char* what) {
  static std::FILE* f = [] {
    const char* p = std::getenv("ZAYA_FUZZ_TRACE");
    return p && *p ? std::fopen(p, "a") : nullptr;
  }();
  if (!f) return;
  for (const char* c = what; *c; ++c) std::fputc(*c == '\n' ? ' ' : *c, f);
  std::fputc('\n', f);
  std::fflush(f);
}
}  // namespace zaya_fuzz

// Runs `body`; the errors a parser is meant to throw (zaya::Error, and any other
// std::exception, which the CLI prints as one line too) are the expected outcome of a bad
// input. Anything else -- a crash, a sanitizer report, a leak, a hang -- is a finding.
#define ZAYA_FUZZ_EXPECT_ERRORS(...)         \
  try {                                      \
    __VA_ARGS__;                             \
  } catch (const std::exception& e_) {       \
    zaya_fuzz::note_error(e_.what());        \
  }
