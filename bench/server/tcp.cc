#include "bench/server/tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/server/push.h"

namespace gradwire::bench {
namespace {

constexpr size_t kReadBlockBytes = size_t{256} << 10;

absl::Status SystemError(const char* call) {
  return absl::UnavailableError(
      absl::StrCat("loopback TCP: ", call, ": ", std::strerror(errno)));
}

// Send and receive time out (gRPC sets TCP_NODELAY too; we match it).
absl::Status ConfigureSocket(int fd) {
  timeval timeout{kCallDeadlineSeconds, 0};
  const int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return SystemError("setsockopt");
  }
  return absl::OkStatus();
}

// A listening socket on 127.0.0.1 with an OS-chosen port, in `*address`.
absl::StatusOr<int> Listen(int backlog, sockaddr_in* address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemError("socket");
  *address = sockaddr_in{};
  address->sin_family = AF_INET;
  address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof *address;
  if (bind(fd, reinterpret_cast<sockaddr*>(address), sizeof *address) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(address), &length) != 0) {
    const absl::Status s = SystemError("bind/listen");
    close(fd);
    return s;
  }
  return fd;
}

absl::Status SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SystemError("send");
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WriteFrames(int fd, const PusherLoad& load, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& frame : load.frames) {
      if (absl::Status s = SendAll(fd, frame); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Walks length-prefixed frames across the blocks that recv returns.
class FrameCounter {
 public:
  void Consume(const unsigned char* data, size_t size) {
    size_t pos = 0;
    while (pos < size) {
      if (payload_left_ > 0) {
        const size_t take = std::min<size_t>(payload_left_, size - pos);
        payload_left_ -= take;
        pos += take;
        if (payload_left_ == 0) ++frames_;
        continue;
      }
      length_ |= uint32_t{data[pos++]} << (8 * header_bytes_);
      if (++header_bytes_ == 4) {
        payload_left_ = length_;
        header_bytes_ = 0;
        length_ = 0;
        if (payload_left_ == 0) ++frames_;
      }
    }
  }
  // Whether the bytes so far are exactly `frames` whole frames.
  bool Complete(uint64_t frames) const {
    return frames_ == frames && header_bytes_ == 0 && payload_left_ == 0;
  }

 private:
  uint64_t frames_ = 0;
  int header_bytes_ = 0;
  uint32_t length_ = 0;
  uint64_t payload_left_ = 0;
};

absl::Status ReadFrames(int fd, const PusherLoad& load, int rounds) {
  uint64_t frame_bytes = 0;
  for (const std::string& frame : load.frames) frame_bytes += frame.size();
  const uint64_t expected = frame_bytes * rounds;
  std::string block(kReadBlockBytes, '\0');
  FrameCounter counter;
  uint64_t received = 0;
  while (received < expected) {
    const size_t want = std::min<uint64_t>(block.size(), expected - received);
    const ssize_t n = recv(fd, block.data(), want, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SystemError("recv");
    if (n == 0) return absl::UnavailableError("loopback TCP: peer closed");
    counter.Consume(reinterpret_cast<const unsigned char*>(block.data()), n);
    received += static_cast<uint64_t>(n);
  }
  if (!counter.Complete(load.frames.size() * static_cast<uint64_t>(rounds))) {
    return absl::DataLossError("loopback TCP: frames do not add up");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpLoopback>> TcpLoopback::Open(
    uint32_t connections) {
  std::unique_ptr<TcpLoopback> loopback(new TcpLoopback());
  sockaddr_in address;
  absl::StatusOr<int> listener =
      Listen(static_cast<int>(connections), &address);
  if (!listener.ok()) return listener.status();
  absl::Status status = absl::OkStatus();
  for (uint32_t i = 0; i < connections && status.ok(); ++i) {
    const int sender = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sender < 0) {
      status = SystemError("socket");
      break;
    }
    loopback->senders_.push_back(sender);
    status = ConfigureSocket(sender);
    if (status.ok() && connect(sender, reinterpret_cast<sockaddr*>(&address),
                               sizeof address) != 0) {
      status = SystemError("connect");
    }
    if (!status.ok()) break;
    const int receiver = accept4(*listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (receiver < 0) {
      status = SystemError("accept");
      break;
    }
    loopback->receivers_.push_back(receiver);
    status = ConfigureSocket(receiver);
  }
  close(*listener);
  if (!status.ok()) return status;
  return loopback;
}

TcpLoopback::~TcpLoopback() {
  for (int fd : senders_) close(fd);
  for (int fd : receivers_) close(fd);
}

absl::Status TcpLoopback::Transfer(absl::Span<const PusherLoad> loads,
                                   int rounds) {
  if (loads.size() > senders_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("loopback TCP: ", loads.size(), " pushers but ",
                     senders_.size(), " connections"));
  }
  std::vector<absl::Status> results(2 * loads.size());
  std::vector<std::thread> threads;
  threads.reserve(results.size());
  for (size_t w = 0; w < loads.size(); ++w) {
    threads.emplace_back([&, w] {
      results[2 * w] = ReadFrames(receivers_[w], loads[w], rounds);
    });
    threads.emplace_back([&, w] {
      results[2 * w + 1] = WriteFrames(senders_[w], loads[w], rounds);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace gradwire::bench
