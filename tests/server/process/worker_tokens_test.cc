#include "server/process/worker_tokens.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

TEST(WorkerTokensTest, ParsesPairsSkippingCommentsAndBlankLines) {
  const auto tokens =
      ParseWorkerTokens("# job 7\n0 alpha-0\n\n  1\tbeta_1  \n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->tokens.size(), 2u);
  EXPECT_EQ(tokens->tokens[0], std::make_pair(0u, std::string("alpha-0")));
  EXPECT_EQ(tokens->tokens[1], std::make_pair(1u, std::string("beta_1")));
}

TEST(WorkerTokensTest, MalformedFilesNameTheLine) {
  const struct {
    const char* content;
    const char* message;
  } cases[] = {
      {"", "no \"WORKER_ID TOKEN\" line"},
      {"0 a\n1\n", "line 2"},
      {"0 a b\n", "line 1"},
      {"x a\n", "line 1"},
      {"-1 a\n", "line 1"},
      {"0 a\n0 b\n", "worker 0 appears twice"},
      {"0 a\n1 a\n", "another worker's"},
  };
  for (const auto& c : cases) {
    const auto tokens = ParseWorkerTokens(c.content);
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument)
        << c.content;
    EXPECT_THAT(tokens.status().message(), HasSubstr(c.message)) << c.content;
  }
}

TEST(WorkerTokensTest, IdentifiesWorkersTheSharedTokenAndRefusals) {
  const WorkerTokens workers = *ParseWorkerTokens("0 zero\n1 one\n");
  auto caller = IdentifyCaller("Bearer one", "shared", workers);
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ(*caller, std::optional<uint32_t>(1));
  caller = IdentifyCaller("Bearer shared", "shared", workers);
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_FALSE(caller->has_value());
  // Without a shared token, only the workers' tokens pass.
  EXPECT_EQ(IdentifyCaller("Bearer shared", "", workers).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(IdentifyCaller("Bearer nobody", "shared", workers).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(IdentifyCaller(absl::nullopt, "shared", workers).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(IdentifyCaller("Basic zero", "", workers).status().code(),
            absl::StatusCode::kUnauthenticated);
  // No worker tokens: the shared token as before.
  caller = IdentifyCaller("Bearer shared", "shared", WorkerTokens());
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_FALSE(caller->has_value());
}

}  // namespace
}  // namespace gradwire
