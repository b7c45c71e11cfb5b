#include "cli/loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gradwire::cli {
namespace {

// A socket descriptor closed when it goes out of scope.
class Socket {
 public:
  Socket() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// Splits a raw answer into its status and body.
absl::StatusOr<HttpAnswer> ParseAnswer(const std::string& raw,
                                       absl::string_view url) {
  HttpAnswer answer;
  answer.status_line = raw.substr(0, raw.find("\r\n"));
  // "HTTP/1.x NNN reason"
  if (!absl::StartsWith(answer.status_line, "HTTP/1.") ||
      answer.status_line.size() < 12 ||
      !absl::SimpleAtoi(answer.status_line.substr(9, 3), &answer.status)) {
    return absl::UnavailableError(
        absl::StrCat("GET ", url, ": not an HTTP answer: \"",
                     answer.status_line.substr(0, 80), "\""));
  }
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end != std::string::npos) answer.body = raw.substr(head_end + 4);
  return answer;
}

}  // namespace

absl::StatusOr<HttpAnswer> HttpGetLoopback(int port, absl::string_view path,
                                           absl::Duration timeout,
                                           size_t max_bytes) {
  const std::string url = absl::StrCat("http://127.0.0.1:", port, path);
  const absl::Time deadline = absl::Now() + timeout;
  Socket s;
  if (s.fd() < 0) return absl::ErrnoToStatus(errno, "socket");
  // Each send and recv may block at most `timeout`; the loop below also
  // keeps the whole exchange within it.
  timeval limit = absl::ToTimeval(timeout);
  setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  sockaddr_in address = Loopback(port);
  if (connect(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    return absl::UnavailableError(
        absl::StrCat("connect 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(s.fd(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("sending GET ", url, " failed"));
  }
  std::string raw;
  char buffer[16384];
  for (;;) {
    const ssize_t n = recv(s.fd(), buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat("GET ", url, ": ", std::strerror(errno)));
    }
    if (n < 0 || absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("GET ", url, ": no complete answer within ",
                       absl::FormatDuration(timeout)));
    }
    if (n == 0) break;
    raw.append(buffer, static_cast<size_t>(n));
    if (raw.size() > max_bytes) {
      return absl::UnavailableError(
          absl::StrCat("GET ", url, ": answer over ", max_bytes, " bytes"));
    }
  }
  if (raw.empty()) {
    return absl::UnavailableError(absl::StrCat("no answer to GET ", url));
  }
  return ParseAnswer(raw, url);
}

absl::StatusOr<int> PickFreeLoopbackPort() {
  Socket s;
  if (s.fd() < 0) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in address = Loopback(0);
  if (bind(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    return absl::ErrnoToStatus(errno, "bind 127.0.0.1:0");
  }
  socklen_t length = sizeof(address);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&address), &length) !=
      0) {
    return absl::ErrnoToStatus(errno, "getsockname");
  }
  return ntohs(address.sin_port);
}

}  // namespace gradwire::cli
