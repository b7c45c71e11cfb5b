// LocalGroup over real c10d Gloo groups: rank 0 runs in the test process,
// ranks 1.. in fork()ed children (Gloo and its threads are not shared across
// ranks that way), each child sending its result back through a pipe. The
// tensors stay small so that no intra-op thread pool starts before a fork.
#include "worker/local_group.h"

#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// What one rank ends up with: its status, and its tensors flattened to
// float.
struct RankResult {
  absl::Status status;
  std::vector<float> values;
};

using RankBody = std::function<absl::StatusOr<std::vector<float>>(int rank)>;

// A port that was free a moment ago (bound to port 0, then closed).
int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "cannot pick a free port";
  }
  close(fd);
  return ntohs(address.sin_port);
}

LocalGroupOptions Options(int rank, int size, int port,
                          absl::Duration timeout = absl::Seconds(10)) {
  LocalGroupOptions options;
  options.rank = rank;
  options.size = size;
  options.store_port = port;
  options.timeout = timeout;
  return options;
}

std::vector<float> Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<float> values;
  for (const at::Tensor& t : tensors) {
    at::Tensor f = t.detach().to(at::kFloat).contiguous().view({-1});
    values.insert(values.end(), f.data_ptr<float>(),
                  f.data_ptr<float>() + f.numel());
  }
  return values;
}

// Wire format of a RankResult on the pipe: code, message size, message,
// value count, values.
void WriteAll(int fd, const void* data, size_t size) {
  const char* cursor = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, cursor, size);
    if (n <= 0) _exit(3);
    cursor += n;
    size -= static_cast<size_t>(n);
  }
}

void SendResult(int fd, const absl::StatusOr<std::vector<float>>& result) {
  const int32_t code = static_cast<int32_t>(result.status().code());
  const std::string message(result.status().message());
  const uint32_t message_size = message.size();
  const std::vector<float> values =
      result.ok() ? *result : std::vector<float>{};
  const uint32_t count = values.size();
  WriteAll(fd, &code, sizeof(code));
  WriteAll(fd, &message_size, sizeof(message_size));
  WriteAll(fd, message.data(), message.size());
  WriteAll(fd, &count, sizeof(count));
  WriteAll(fd, values.data(), values.size() * sizeof(float));
}

// Reads until `size` bytes arrived, the writer closed, or the deadline.
bool ReadAll(int fd, void* data, size_t size, absl::Time deadline) {
  char* cursor = static_cast<char*>(data);
  while (size > 0) {
    pollfd waiting = {fd, POLLIN, 0};
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0 || poll(&waiting, 1, static_cast<int>(left_ms)) <= 0) {
      return false;
    }
    const ssize_t n = read(fd, cursor, size);
    if (n <= 0) return false;
    cursor += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

RankResult ReceiveResult(int fd, absl::Time deadline) {
  int32_t code = 0;
  uint32_t message_size = 0, count = 0;
  std::string message;
  std::vector<float> values;
  bool ok = ReadAll(fd, &code, sizeof(code), deadline) &&
            ReadAll(fd, &message_size, sizeof(message_size), deadline);
  message.resize(ok ? message_size : 0);
  ok = ok && ReadAll(fd, message.data(), message.size(), deadline) &&
       ReadAll(fd, &count, sizeof(count), deadline);
  values.resize(ok ? count : 0);
  ok =
      ok && ReadAll(fd, values.data(), values.size() * sizeof(float), deadline);
  if (!ok) return {absl::DeadlineExceededError("no result from child"), {}};
  return {absl::Status(static_cast<absl::StatusCode>(code), message),
          std::move(values)};
}

// Runs body(rank) for ranks 0..size-1, rank 0 here and the others in child
// processes; returns the results by rank. Children that do not answer within
// 20 s are killed.
std::vector<RankResult> RunRanks(int size, const RankBody& body) {
  std::vector<pid_t> children;
  std::vector<int> pipes;
  std::fflush(nullptr);
  for (int rank = 1; rank < size; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) ADD_FAILURE() << "pipe failed";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      SendResult(fds[1], body(rank));
      _exit(0);  // No destructors, no gtest output from the child.
    }
    close(fds[1]);
    children.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::vector<RankResult> results;
  absl::StatusOr<std::vector<float>> mine = body(0);
  results.push_back({mine.status(), mine.ok() ? *mine : std::vector<float>{}});
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (size_t i = 0; i < children.size(); ++i) {
    results.push_back(ReceiveResult(pipes[i], deadline));
    close(pipes[i]);
    kill(children[i], SIGKILL);  // Done or hung: it has nothing left to say.
    waitpid(children[i], nullptr, 0);
  }
  return results;
}

// Rank r's tensors: values that differ by rank, in two dtypes, one tensor
// non-contiguous and one a leaf that requires grad (as parameters are).
std::vector<at::Tensor> RankTensors(int rank) {
  const double scale = rank + 1;
  at::Tensor matrix = (at::arange(6, at::kFloat) * scale + rank).view({2, 3});
  return {matrix.t(),  // non-contiguous
          at::full({4}, 10.0 * scale, at::kDouble),
          (at::arange(5, at::kFloat) - rank).requires_grad_(true),
          at::empty({0}, at::kFloat)};
}

std::vector<float> ExpectedMean(int size) {
  std::vector<double> sum(Flatten(RankTensors(0)).size(), 0.0);
  for (int rank = 0; rank < size; ++rank) {
    std::vector<float> values = Flatten(RankTensors(rank));
    for (size_t i = 0; i < values.size(); ++i) sum[i] += values[i];
  }
  std::vector<float> mean;
  for (double s : sum) mean.push_back(static_cast<float>(s / size));
  return mean;
}

class LocalGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(LocalGroupTest, AllReduceMeanGivesEveryRankTheAverage) {
  const int size = GetParam();
  const int port = PickFreePort();
  std::vector<RankResult> results =
      RunRanks(size, [&](int rank) -> absl::StatusOr<std::vector<float>> {
        auto group = LocalGroup::Create(Options(rank, size, port));
        if (!group.ok()) return group.status();
        std::vector<at::Tensor> tensors = RankTensors(rank);
        if (absl::Status s = (*group)->AllReduceMean(tensors); !s.ok()) {
          return s;
        }
        return Flatten(tensors);
      });
  for (int rank = 0; rank < size; ++rank) {
    SCOPED_TRACE(absl::StrCat("rank ", rank));
    ASSERT_TRUE(results[rank].status.ok()) << results[rank].status;
    EXPECT_THAT(results[rank].values,
                Pointwise(::testing::FloatNear(1e-5), ExpectedMean(size)));
  }
}

TEST_P(LocalGroupTest, BroadcastCopiesTheRootsTensorsEverywhere) {
  const int size = GetParam();
  const int port = PickFreePort();
  const int root = size - 1;
  std::vector<RankResult> results =
      RunRanks(size, [&](int rank) -> absl::StatusOr<std::vector<float>> {
        auto group = LocalGroup::Create(Options(rank, size, port));
        if (!group.ok()) return group.status();
        std::vector<at::Tensor> tensors = RankTensors(rank);
        tensors.push_back(at::full({3}, rank, at::kLong));  // any dtype
        if (absl::Status s = (*group)->Broadcast(tensors, root); !s.ok()) {
          return s;
        }
        return Flatten(tensors);
      });
  std::vector<at::Tensor> expected = RankTensors(root);
  expected.push_back(at::full({3}, root, at::kLong));
  for (int rank = 0; rank < size; ++rank) {
    SCOPED_TRACE(absl::StrCat("rank ", rank));
    ASSERT_TRUE(results[rank].status.ok()) << results[rank].status;
    EXPECT_THAT(results[rank].values, ElementsAreArray(Flatten(expected)));
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalGroupTest, ::testing::Values(2, 3));

TEST(LocalGroupSizeOneTest, IsANoOp) {
  // No store is started: the port is never bound.
  auto group = LocalGroup::Create(Options(0, 1, /*port=*/1));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->rank(), 0);
  EXPECT_EQ((*group)->size(), 1);
  std::vector<at::Tensor> tensors = RankTensors(0);
  const std::vector<float> before = Flatten(tensors);
  EXPECT_TRUE((*group)->AllReduceMean(tensors).ok());
  EXPECT_TRUE((*group)->Broadcast(tensors, 0).ok());
  EXPECT_EQ(Flatten(tensors), before);
  EXPECT_EQ((*group)->Broadcast(tensors, 1).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalGroupOptionsTest, RejectsBadOptions) {
  EXPECT_EQ(LocalGroup::Create(Options(2, 2, 29500)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalGroup::Create(Options(0, 0, 29500)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalGroup::Create(Options(0, 2, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalGroup::Create(Options(0, 2, 29500, absl::ZeroDuration()))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalGroupTensorsTest, RejectsTensorsItCannotAverage) {
  auto group = LocalGroup::Create(Options(0, 1, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<at::Tensor> integers = {at::ones({2}, at::kInt)};
  absl::Status status = (*group)->AllReduceMean(integers);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("floats"));
  std::vector<at::Tensor> undefined = {at::Tensor()};
  EXPECT_EQ((*group)->AllReduceMean(undefined).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<at::Tensor> sparse = {at::ones({2}).to_sparse()};
  EXPECT_EQ((*group)->Broadcast(sparse, 0).code(),
            absl::StatusCode::kInvalidArgument);
}

// A rank that never shows up: Create fails within about the timeout instead
// of hanging, on the rank that hosts the store and on one that connects.
TEST(LocalGroupTimeoutTest, MissingRankFailsWithinTheTimeout) {
  for (int rank : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("rank ", rank));
    const absl::Time start = absl::Now();
    auto group =
        LocalGroup::Create(Options(rank, 2, PickFreePort(), absl::Seconds(2)));
    const absl::Duration elapsed = absl::Now() - start;
    ASSERT_FALSE(group.ok());
    EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded)
        << group.status();
    if (rank == 0) {
      EXPECT_THAT(group.status().message(),
                  HasSubstr("rank(s) 1 did not join"));
    }
    EXPECT_LT(elapsed, absl::Seconds(5));
  }
}

// A peer that leaves after the rendezvous: the collective fails within the
// timeout (writing to its closed socket is an error, not a SIGPIPE that
// ends the test), and the group refuses further work.
TEST(LocalGroupTimeoutTest, LostPeerBreaksTheGroup) {
  const int port = PickFreePort();
  std::vector<RankResult> results =
      RunRanks(2, [&](int rank) -> absl::StatusOr<std::vector<float>> {
        auto group =
            LocalGroup::Create(Options(rank, 2, port, absl::Seconds(2)));
        if (!group.ok()) return group.status();
        if (rank == 1) return std::vector<float>{};  // leaves the group
        std::vector<at::Tensor> tensors = RankTensors(rank);
        const absl::Time start = absl::Now();
        absl::Status first = (*group)->AllReduceMean(tensors);
        if (first.ok()) return absl::InternalError("all-reduce succeeded");
        if (first.code() != absl::StatusCode::kUnavailable &&
            first.code() != absl::StatusCode::kDeadlineExceeded) {
          return absl::InternalError(absl::StrCat("first: ", first.ToString()));
        }
        if (absl::Now() - start > absl::Seconds(5)) {
          return absl::InternalError("all-reduce took too long");
        }
        absl::Status second = (*group)->AllReduceMean(tensors);
        if (second.code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError(
              absl::StrCat("second call: ", second.ToString()));
        }
        return std::vector<float>{};
      });
  EXPECT_TRUE(results[0].status.ok()) << results[0].status;
}

}  // namespace
}  // namespace gradwire
