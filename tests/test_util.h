// Helpers shared by the test files: a temporary directory per test, the message of an error.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"

namespace zaya::test_util {

// A fresh directory under the system temp dir (unique per suite, tag and process), removed
// at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir(const std::string& suite, const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("zaya_test_" + suite + "_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The message of the zaya::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace zaya::test_util
