// The one way C++ tests measure how far a result is from its reference. std::max(worst, NaN)
// keeps worst and `NaN > worst` is false, so a hand-rolled maximum scores an all-NaN result 0
// and passes; MaxError counts every non-finite value (NaN, +inf, -inf) on either side and then
// reports +inf, which fails any `EXPECT_LT(e.rel(), tol)`. within() says why in its message.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

namespace zaya::test_util {

struct MaxError {
  double worst = 0;          // largest |got - want| over the finite pairs
  double scale = 0;          // largest |want| over the finite pairs
  size_t count = 0;          // pairs (or errors) added
  size_t nonfinite = 0;      // pairs with a NaN or infinity on either side (or such errors)
  size_t first_bad = 0;      // index (in add order) of the first of them
  size_t worst_at = 0;       // index of the largest finite difference

  // One pair: the result and its reference.
  void add(double got, double want) {
    if (!std::isfinite(got) || !std::isfinite(want)) return flag();
    const double d = std::fabs(got - want);
    if (d > worst) worst = d, worst_at = count;
    if (std::fabs(want) > scale) scale = std::fabs(want);
    ++count;
  }
  template <class A, class B>
  void add(const A* got, const B* want, size_t n) {
    for (size_t i = 0; i < n; ++i) add(double(got[i]), double(want[i]));
  }
  template <class VA, class VB>
  void add_all(const VA& got, const VB& want) {
    if (got.size() != want.size()) return flag();  // a length mismatch is no agreement
    add(got.data(), want.data(), got.size());
  }
  // An error computed elsewhere (e.g. relative to each element's own magnitude).
  void add_error(double err) {
    if (!std::isfinite(err)) return flag();
    if (std::fabs(err) > worst) worst = std::fabs(err), worst_at = count;
    ++count;
  }

  bool finite() const { return nonfinite == 0; }
  // Largest |got - want|; +inf when any value was NaN or infinite.
  double abs() const { return finite() ? worst : std::numeric_limits<double>::infinity(); }
  // abs() relative to the largest |want| (floored at `floor`, so an all-zero reference
  // divides by floor); +inf when any value was NaN or infinite.
  double rel(double floor = 1e-30) const {
    return finite() ? worst / std::max(scale, floor) : std::numeric_limits<double>::infinity();
  }
  std::string describe() const {
    std::string s = std::to_string(count) + " values, max |diff| " + std::to_string(worst) + " at " +
                    std::to_string(worst_at) + ", max |ref| " + std::to_string(scale);
    if (nonfinite)
      s += ", " + std::to_string(nonfinite) + " NaN or infinite (first at " + std::to_string(first_bad) + ")";
    return s;
  }
  // Passes when every value was finite, something was compared, and abs() (rel() when
  // relative) is at most tol.
  ::testing::AssertionResult within(double tol, bool relative = false) const {
    const double e = relative ? rel() : abs();
    if (finite() && count > 0 && e <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (relative ? "relative" : "absolute") << " error " << e << " > " << tol
                                         << " or nothing finite compared: " << describe();
  }

 private:
  void flag() {
    if (!nonfinite++) first_bad = count;
    ++count;
  }
};

// Largest of two errors, +inf when either is NaN or infinite (std::max(a, NaN) returns a).
inline double max_err(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  return a < b ? b : a;
}

}  // namespace zaya::test_util
