// The comparison helper every numeric test uses fails on NaN and infinities, on either side,
// wherever they sit (first, middle, last, everywhere).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "check_util.h"

using zaya::test_util::max_err;
using zaya::test_util::MaxError;

namespace {

const double kBad[3] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity()};

}  // namespace

TEST(CheckUtil, AgreementPasses) {
  const std::vector<float> want{1.f, -2.f, 3.f, 0.f}, got{1.f, -2.f, 3.0001f, 0.f};
  MaxError e;
  e.add_all(got, want);
  EXPECT_EQ(e.count, 4u);
  EXPECT_NEAR(e.abs(), 1e-4, 1e-6);
  EXPECT_NEAR(e.rel(), 1e-4 / 3, 1e-6);
  EXPECT_EQ(e.worst_at, 2u);
  EXPECT_TRUE(e.within(2e-4));
  EXPECT_TRUE(e.within(1e-4, true));
  EXPECT_FALSE(e.within(1e-5));  // over the tolerance
  EXPECT_FALSE(MaxError().within(1.0));  // nothing compared
}

TEST(CheckUtil, EveryNonFiniteValueFailsOnEitherSide) {
  for (const double bad : kBad)
    for (const size_t at : {size_t(0), size_t(2), size_t(4)})
      for (const bool on_got : {true, false}) {
        std::vector<double> want{1, 2, 3, 4, 5}, got = want;
        (on_got ? got : want)[at] = bad;
        MaxError e;
        e.add_all(got, want);
        EXPECT_EQ(e.nonfinite, 1u) << bad << " at " << at;
        EXPECT_EQ(e.first_bad, at);
        EXPECT_EQ(e.abs(), std::numeric_limits<double>::infinity()) << bad << " at " << at;
        EXPECT_EQ(e.rel(), std::numeric_limits<double>::infinity()) << bad << " at " << at;
        EXPECT_FALSE(e.within(1e300)) << bad << " at " << at;
        EXPECT_FALSE(e.within(1e300, true)) << bad << " at " << at;
        EXPECT_FALSE(e.abs() < 1e300);  // the way the tests assert it
      }
}

TEST(CheckUtil, TheSameNaNOnBothSidesFails) {
  for (const double bad : kBad) {
    MaxError e;
    std::vector<float> all(8, float(bad));
    e.add_all(all, all);  // an all-NaN result against an all-NaN reference: no agreement
    EXPECT_EQ(e.nonfinite, 8u);
    EXPECT_FALSE(e.within(1.0));
    EXPECT_EQ(e.abs(), std::numeric_limits<double>::infinity());
  }
}

TEST(CheckUtil, ComputedErrorsAndMaxErr) {
  for (const double bad : kBad) {
    MaxError e;
    e.add_error(0.5);
    e.add_error(bad);
    e.add_error(0.25);
    EXPECT_EQ(e.abs(), std::numeric_limits<double>::infinity()) << bad;
    EXPECT_FALSE(e.within(1e300)) << bad;
    EXPECT_EQ(max_err(0.5, bad), std::numeric_limits<double>::infinity()) << bad;
    EXPECT_EQ(max_err(bad, 0.5), std::numeric_limits<double>::infinity()) << bad;
  }
  EXPECT_EQ(max_err(0.5, 0.25), 0.5);
  EXPECT_EQ(max_err(0.25, 0.5), 0.5);
}

TEST(CheckUtil, LengthMismatchFails) {
  MaxError e;
  e.add_all(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3});
  EXPECT_FALSE(e.within(1.0));
}
