// A pull answer's bytes stay in the shard's memory budget until gRPC is done
// with the call, not only until the handler returns: a client that never
// opens its HTTP/2 flow-control window keeps them in the shard's memory,
// and the budget must see them. Observed on a real server process through
// gradwire_shard_memory_budget_used_bytes, with a client that speaks
// HTTP/2 itself to hold its window closed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/common/metrics_test_util.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_model.h"

namespace gradwire::testing {
namespace {

using ::gradwire::metrics_test::HttpRequest;
using ::gradwire::metrics_test::ParseSamples;

constexpr size_t kNumel = size_t{1} << 20;  // A 4 MiB answer.

// The shard's memory budget use, from its /metrics; -1 when unreadable.
double BudgetUsed(int metrics_port) {
  auto response = HttpRequest(metrics_port, "/metrics");
  if (!response.ok()) return -1;
  const auto samples = ParseSamples(response->body);
  const auto it =
      samples.find("gradwire_shard_memory_budget_used_bytes{shard=\"0\"}");
  return it == samples.end() ? -1 : it->second;
}

// Polls BudgetUsed until `holds` says yes or `timeout` passes; the last
// value seen.
template <typename Predicate>
double AwaitBudget(int metrics_port, Predicate holds,
                   absl::Duration timeout = absl::Seconds(5)) {
  const absl::Time end = absl::Now() + timeout;
  double used = BudgetUsed(metrics_port);
  while (!holds(used) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(20));
    used = BudgetUsed(metrics_port);
  }
  return used;
}

// A client speaking HTTP/2 over a plain socket that announces a stream
// window of 0 bytes: the shard can send its answer's headers but none of
// its bytes until WINDOW_UPDATE. Answers SETTINGS and PING as any client
// does, on a thread of its own.
class ClosedWindowClient {
 public:
  ~ClosedWindowClient() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  // Connects to 127.0.0.1:`port` and sends `request` as a unary call of
  // `method` ("/package.Service/Method") on stream 1.
  bool Call(int port, const std::string& method, const std::string& request) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address),
                             sizeof(address)) != 0) {
      return false;
    }
    std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0.
    out += Frame(kSettings, 0, 0, std::string("\x00\x04\x00\x00\x00\x00", 6));
    std::string headers;
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, std::string>>{
             {":method", "POST"},
             {":scheme", "http"},
             {":path", method},
             {":authority", "127.0.0.1"},
             {"content-type", "application/grpc"},
             {"te", "trailers"}}) {
      // A literal without indexing, new name, no Huffman coding; every
      // length here is under 127, one byte.
      headers += '\0';
      headers += static_cast<char>(name.size());
      headers += name;
      headers += static_cast<char>(value.size());
      headers += value;
    }
    out += Frame(kHeaders, kEndHeaders, 1, headers);
    std::string message(5, '\0');
    for (int i = 0; i < 4; ++i) {
      message[1 + i] = static_cast<char>(request.size() >> (24 - 8 * i));
    }
    out += Frame(kData, kEndStream, 1, message + request);
    if (!Send(out)) return false;
    reader_ = std::thread([this] { Read(); });
    return true;
  }

  // Opens both windows wide: the shard may send everything.
  bool OpenWindow() {
    const std::string increment("\x7f\xff\xff\xff", 4);
    return Send(Frame(kWindowUpdate, 0, 0, increment) +
                Frame(kWindowUpdate, 0, 1, increment));
  }

  // Whether the call's trailers (stream 1's END_STREAM) arrived within
  // `timeout`.
  bool AwaitEnd(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
  }

 private:
  static constexpr uint8_t kData = 0, kHeaders = 1, kSettings = 4, kPing = 6,
                           kWindowUpdate = 8;
  static constexpr uint8_t kEndStream = 1, kAck = 1, kEndHeaders = 4;

  static std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                           const std::string& payload) {
    std::string frame;
    for (int shift : {16, 8, 0})
      frame += static_cast<char>(payload.size() >> shift);
    frame += static_cast<char>(type);
    frame += static_cast<char>(flags);
    for (int shift : {24, 16, 8, 0})
      frame += static_cast<char>(stream >> shift);
    return frame + payload;
  }

  bool Send(const std::string& bytes) {
    absl::MutexLock lock(&send_mu_);
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n =
          ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += n;
    }
    return true;
  }

  bool ReadExactly(size_t size, std::string* out) {
    out->resize(size);
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::recv(fd_, out->data() + got, size - got, 0);
      if (n <= 0) return false;
      got += n;
    }
    return true;
  }

  void Read() {
    std::string header, payload;
    while (ReadExactly(9, &header)) {
      const auto byte = [&header](int i) {
        return static_cast<uint8_t>(header[i]);
      };
      const size_t size = (byte(0) << 16) | (byte(1) << 8) | byte(2);
      const uint8_t type = byte(3), flags = byte(4);
      const uint32_t stream =
          ((byte(5) & 0x7f) << 24) | (byte(6) << 16) | (byte(7) << 8) | byte(8);
      if (!ReadExactly(size, &payload)) return;
      if (type == kSettings && !(flags & kAck)) {
        Send(Frame(kSettings, kAck, 0, ""));
      } else if (type == kPing && !(flags & kAck)) {
        Send(Frame(kPing, kAck, 0, payload));
      } else if (stream == 1 && (type == kHeaders || type == kData) &&
                 (flags & kEndStream)) {
        absl::MutexLock lock(&mu_);
        ended_ = true;
      }
    }
  }

  int fd_ = -1;
  std::thread reader_;
  absl::Mutex send_mu_;
  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(AnswerLeaseTest, AnUnreadAnswerStaysInTheBudgetUntilTheCallIsDone) {
  TempDir dir;
  const std::string port_file = dir.path() + "/metrics.port";
  auto server = ServerProcess::Start({"--mode=bsp", "--num-workers=1",
                                      "--metrics-address=127.0.0.1",
                                      "--metrics-port-file=" + port_file});
  ASSERT_TRUE(server.ok()) << server.status();
  int metrics_port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::StripAsciiWhitespace(ReadFileOrEmpty(port_file)), &metrics_port));
  const std::vector<TestChunk> chunks = MakeChunks({kNumel}, /*seed=*/5);
  auto stub = (*server)->NewStub();
  ASSERT_TRUE(InitBspWorkers(stub.get(), chunks, 1).ok());
  EXPECT_EQ(BudgetUsed(metrics_port), 0);

  v1::PullRequest request;
  request.set_worker_id(0);
  request.add_chunks()->set_key(chunks[0].key);
  ClosedWindowClient client;
  ASSERT_TRUE(client.Call((*server)->port(),
                          "/gradwire.v1.ParameterServer/Pull",
                          request.SerializeAsString()));

  // The serialized answer waits in the shard for the client: counted.
  const auto holds_answer = [](double used) { return used >= kNumel * 4; };
  const double held = AwaitBudget(metrics_port, holds_answer);
  EXPECT_TRUE(holds_answer(held)) << held << " bytes held";
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(holds_answer(BudgetUsed(metrics_port)));
  EXPECT_FALSE(client.AwaitEnd(absl::ZeroDuration()));

  // The window opened at last: the answer is sent, the call ends and the
  // bytes are given back.
  ASSERT_TRUE(client.OpenWindow());
  EXPECT_TRUE(client.AwaitEnd(absl::Seconds(10)));
  EXPECT_EQ(AwaitBudget(metrics_port, [](double used) { return used == 0; }),
            0);
}

}  // namespace
}  // namespace gradwire::testing
