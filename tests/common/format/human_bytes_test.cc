// HumanBytes and CompressionRatio: the figures every progress line and
// report prints.
#include "common/format/human_bytes.h"

#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(HumanBytesTest, BytesBelowOneKilobyteAreWhole) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(999), "999 B");
}

TEST(HumanBytesTest, LargerCountsUseDecimalUnitsWithOneDecimal) {
  EXPECT_EQ(HumanBytes(1000), "1.0 kB");
  EXPECT_EQ(HumanBytes(258125), "258.1 kB");
  EXPECT_EQ(HumanBytes(32572792), "32.6 MB");
  EXPECT_EQ(HumanBytes(uint64_t{1234} * 1000 * 1000), "1.2 GB");
  EXPECT_EQ(HumanBytes(uint64_t{5} * 1000 * 1000 * 1000 * 1000 * 1000),
            "5000.0 TB");
}

TEST(CompressionRatioTest, IsDenseOverSentAndZeroWhenNothingWasSent) {
  EXPECT_DOUBLE_EQ(CompressionRatio(1000, 10), 100.0);
  EXPECT_DOUBLE_EQ(CompressionRatio(5, 10), 0.5);
  EXPECT_EQ(CompressionRatio(1000, 0), 0.0);
}

}  // namespace
}  // namespace gradwire
