#include "common/metrics/text_format.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire::metrics {
namespace {

TEST(MetricsTextFormatTest, SpecialValuesAreSpelledAsPrometheusParsesThem) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(MetricsTextFormatTest, IntegersHaveNoExponentOrFraction) {
  EXPECT_EQ(FormatValue(0.0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(1.0), "1");
  EXPECT_EQ(FormatValue(-42.0), "-42");
  EXPECT_EQ(FormatValue(1e6), "1000000");
  EXPECT_EQ(FormatValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(FormatValue(9007199254740991.0), "9007199254740991");
}

TEST(MetricsTextFormatTest, FractionsAreShortestAndRoundTrip) {
  EXPECT_EQ(FormatValue(0.5), "0.5");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(-2.25), "-2.25");
  EXPECT_EQ(FormatValue(1e-9), "1e-09");
  for (double value : {0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, 1e300,
                       std::numeric_limits<double>::denorm_min()}) {
    EXPECT_EQ(std::strtod(FormatValue(value).c_str(), nullptr), value)
        << FormatValue(value);
  }
}

TEST(MetricsTextFormatTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue(R"(C:\dir)"), R"(C:\\dir)");
  EXPECT_EQ(EscapeLabelValue(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), R"(two\nlines)");
  // Other bytes, tabs and UTF-8 included, pass through.
  EXPECT_EQ(EscapeLabelValue("tab\there \xc3\xa9"), "tab\there \xc3\xa9");
}

TEST(MetricsTextFormatTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp(R"(a\b)"), R"(a\\b)");
  EXPECT_EQ(EscapeHelp("first\nsecond"), R"(first\nsecond)");
  EXPECT_EQ(EscapeHelp(R"(the "quoted" word)"), R"(the "quoted" word)");
}

TEST(MetricsTextFormatTest, SerializesFamiliesAsTheFormatSpecifies) {
  std::vector<FamilySnapshot> families(3);
  families[0].name = "demo_requests_total";
  families[0].help = "Requests, \"quoted\" in help\nand \\ escaped.";
  families[0].type = MetricType::kCounter;
  families[0].samples = {
      {"demo_requests_total", {{"code", "ok"}, {"path", "/a\"b\\c\nd"}}, 3},
      {"demo_requests_total", {{"code", "error"}, {"path", "/"}}, 0.5}};
  families[1].name = "demo_empty";
  families[1].help = "Never written: no samples.";
  families[2].name = "demo_temperature";
  families[2].help = "Unlabelled gauge.";
  families[2].type = MetricType::kGauge;
  families[2].samples = {{"demo_temperature", {}, -1.5}};
  EXPECT_EQ(SerializeText(families),
            "# HELP demo_requests_total Requests, \"quoted\" in help\\nand "
            "\\\\ escaped.\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{code=\"ok\",path=\"/a\\\"b\\\\c\\nd\"} 3\n"
            "demo_requests_total{code=\"error\",path=\"/\"} 0.5\n"
            "# HELP demo_temperature Unlabelled gauge.\n"
            "# TYPE demo_temperature gauge\n"
            "demo_temperature -1.5\n");
}

TEST(MetricsTextFormatTest, ContentTypeIsVersionZeroZeroFour) {
  EXPECT_EQ(kTextContentType, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
}  // namespace gradwire::metrics
