// GrpcPsClient and CheckHealth without a server: option validation, and
// unreachable addresses reported as UNAVAILABLE in time. The client against
// real shards is tested in tests/integration/grpc_ps_client_test.cc.
#include "client/grpc_ps_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/health_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/dead_address.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

using testing::DeadAddress;

TEST(ClientOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateClientOptions(ClientOptions()).ok());
}

TEST(ClientOptionsTest, EachBadFieldIsNamed) {
  const struct {
    const char* field;
    std::function<void(ClientOptions*)> spoil;
  } cases[] = {
      {"rpc_timeout",
       [](ClientOptions* o) { o->rpc_timeout = absl::ZeroDuration(); }},
      {"pull_timeout",
       [](ClientOptions* o) { o->pull_timeout = -absl::Seconds(1); }},
      {"max_attempts", [](ClientOptions* o) { o->max_attempts = 0; }},
      {"initial_backoff",
       [](ClientOptions* o) { o->initial_backoff = absl::ZeroDuration(); }},
      {"max_backoff",
       [](ClientOptions* o) { o->max_backoff = absl::Milliseconds(10); }},
      {"connect_timeout",
       [](ClientOptions* o) { o->connect_timeout = absl::ZeroDuration(); }},
      {"max_message_bytes",
       [](ClientOptions* o) { o->max_message_bytes = 100; }},
      {"max_message_bytes",
       [](ClientOptions* o) { o->max_message_bytes = uint64_t{1} << 31; }},
  };
  for (const auto& c : cases) {
    ClientOptions options;
    c.spoil(&options);
    const absl::Status s = ValidateClientOptions(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
    EXPECT_EQ(GrpcPsClient::Connect({"127.0.0.1:1"}, options).status().code(),
              absl::StatusCode::kInvalidArgument)
        << c.field;
  }
}

TEST(GrpcPsClientConnectTest, NeedsAddresses) {
  EXPECT_EQ(GrpcPsClient::Connect({}, ClientOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status empty =
      GrpcPsClient::Connect({"127.0.0.1:1", ""}, ClientOptions()).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("shard 1"));
}

TEST(GrpcPsClientConnectTest, DeadAddressIsUnavailableAfterTheConnectTimeout) {
  const std::string dead = DeadAddress();
  ClientOptions options;
  options.connect_timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const absl::Status s = GrpcPsClient::Connect({dead}, options).status();
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 0 (" + dead + ")"));
  EXPECT_GE(elapsed, absl::Milliseconds(250));
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST(CheckHealthTest, RefusesBadArguments) {
  EXPECT_EQ(CheckHealth("", absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckHealth("127.0.0.1:1", absl::ZeroDuration()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckHealthTest, DeadAddressIsUnavailableAtOnce) {
  const std::string dead = DeadAddress();
  const absl::Time start = absl::Now();
  const absl::Status s = CheckHealth(dead, absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(dead));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace gradwire
