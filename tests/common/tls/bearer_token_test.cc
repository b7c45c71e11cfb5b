// Bearer tokens: the constant-time comparison, the shard's decision on a
// call's authorization value, and reading the token file.
#include "common/tls/bearer_token.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ConstantTimeEqualsTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cr3t-token", "s3cr3t-token"));
  EXPECT_FALSE(ConstantTimeEquals("s3cr3t-token", "s3cr3t-tokeN"));
  EXPECT_FALSE(ConstantTimeEquals("s3cr3t-token", "S3cr3t-token"));
  // A prefix, an extension and a string padded with zero bytes differ too.
  EXPECT_FALSE(ConstantTimeEquals("s3cr3t-token", "s3cr3t"));
  EXPECT_FALSE(ConstantTimeEquals("s3cr3t", "s3cr3t-token"));
  EXPECT_FALSE(ConstantTimeEquals("abc", std::string("abc\0", 4)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("abc\0", 4), "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
}

TEST(ConstantTimeEqualsTest, EveryBytePositionAndBitCounts) {
  const std::string token(64, 'k');
  for (size_t i = 0; i < token.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string other = token;
      other[i] = static_cast<char>(other[i] ^ (1 << bit));
      EXPECT_FALSE(ConstantTimeEquals(token, other)) << i << " " << bit;
    }
  }
}

TEST(CheckBearerAuthorizationTest, CodesOfEachCase) {
  EXPECT_TRUE(CheckBearerAuthorization("Bearer tok", "tok").ok());
  // The scheme is case-insensitive (RFC 7235), the token is not.
  EXPECT_TRUE(CheckBearerAuthorization("bearer tok", "tok").ok());
  EXPECT_EQ(CheckBearerAuthorization(absl::nullopt, "tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerAuthorization("", "tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerAuthorization("Basic dG9rOg==", "tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerAuthorization("tok", "tok").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CheckBearerAuthorization("Bearer TOK", "tok").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckBearerAuthorization("Bearer ", "tok").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckBearerAuthorization("Bearer tok ", "tok").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(CheckBearerAuthorizationTest, MessagesNeverShowATokens) {
  const absl::Status wrong =
      CheckBearerAuthorization("Bearer guessed-value", "expected-value");
  EXPECT_THAT(std::string(wrong.message()), Not(HasSubstr("guessed-value")));
  EXPECT_THAT(std::string(wrong.message()), Not(HasSubstr("expected-value")));
}

TEST(BearerAuthorizationValueTest, PrefixesTheScheme) {
  EXPECT_EQ(BearerAuthorizationValue("abc"), "Bearer abc");
  EXPECT_TRUE(
      CheckBearerAuthorization(BearerAuthorizationValue("abc"), "abc").ok());
}

class LoadAuthTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gradwire-token-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string dir_;
};

TEST_F(LoadAuthTokenTest, TrimsTrailingWhitespace) {
  auto token = LoadAuthToken("auth-token-file", Write("t", "abc123\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
  token = LoadAuthToken("auth-token-file", Write("u", "abc123 \t\r\n\n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
}

TEST_F(LoadAuthTokenTest, RefusesEmptyMissingAndOddFiles) {
  const std::string empty = Write("empty", "");
  absl::StatusOr<std::string> token = LoadAuthToken("auth-token-file", empty);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(token.status().message()),
              HasSubstr("--auth-token-file=" + empty +
                        ": the token file is "
                        "empty"));
  token = LoadAuthToken("auth-token-file", Write("blank", " \n\n"));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);

  const std::string missing = dir_ + "/missing";
  token = LoadAuthToken("auth-token-file", missing);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(token.status().message()),
              HasSubstr("--auth-token-file=" + missing + ": cannot read it"));

  token = LoadAuthToken("auth-token-file", dir_);
  EXPECT_THAT(std::string(token.status().message()),
              HasSubstr("is not a regular file"));

  token = LoadAuthToken("auth-token-file", Write("space", "two words\n"));
  EXPECT_THAT(std::string(token.status().message()),
              HasSubstr("byte 3 of the token"));
  token = LoadAuthToken("auth-token-file", Write("newline", "two\nlines\n"));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gradwire
