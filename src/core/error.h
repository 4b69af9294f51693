// Errors: every failure a user can cause is a zaya::Error with a one-line message
// naming the file, field or value at fault. The CLI prints it and exits non-zero.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace zaya {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Concatenates its arguments with operator<< into one message.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(cat(args...));
}

}  // namespace zaya

// ZAYA_CHECK(cond, "field x: ", x, " is bad") throws zaya::Error when cond is false.
#define ZAYA_CHECK(cond, ...)                 \
  do {                                        \
    if (!(cond)) ::zaya::fail(__VA_ARGS__);   \
  } while (0)
