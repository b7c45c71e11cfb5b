#include "common/metrics/exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/text_format.h"

namespace gradwire::metrics {
namespace {

constexpr absl::string_view kPlainText = "text/plain; charset=utf-8";
// The most a request line and its headers may take; Prometheus sends a few
// hundred bytes.
constexpr size_t kMaxRequestHead = 16 * 1024;
// How long a connection may stay silent before it is dropped, whatever
// its deadlines leave.
constexpr absl::Duration kIdleTimeout = absl::Seconds(10);
// What is read and dropped after a response, so that closing a socket with
// unread input (a request body) does not reset the connection before the
// client has read the answer; bounded in bytes and in total time, so that
// a client still trickling cannot hold the thread here either.
constexpr size_t kMaxDrainedBytes = 64 * 1024;
constexpr absl::Duration kDrainTime = absl::Seconds(1);
constexpr int kListenBacklog = 16;

// A numeric address and port as one socket address.
struct BindAddress {
  struct sockaddr_storage storage = {};
  socklen_t length = 0;
  // "127.0.0.1:9100" or "[::1]:9100", for messages.
  std::string text;
};

absl::StatusOr<BindAddress> ParseBindAddress(const std::string& address,
                                             int port) {
  BindAddress bind_address;
  auto* v4 = reinterpret_cast<struct sockaddr_in*>(&bind_address.storage);
  auto* v6 = reinterpret_cast<struct sockaddr_in6*>(&bind_address.storage);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    bind_address.length = sizeof *v4;
    bind_address.text = absl::StrCat(address, ":", port);
    return bind_address;
  }
  if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    bind_address.length = sizeof *v6;
    bind_address.text = absl::StrCat("[", address, "]:", port);
    return bind_address;
  }
  // A host name would need a resolver and could name several interfaces:
  // the endpoint must not be exposed more widely than asked.
  return absl::InvalidArgumentError(absl::StrCat(
      "metrics address \"", address, "\" is not a numeric IP address"));
}

absl::Status ErrnoStatus(int error, absl::string_view what,
                         const BindAddress& where) {
  return absl::UnavailableError(
      absl::StrCat("cannot serve metrics on ", where.text, ": ", what, ": ",
                   std::strerror(error), " (", error, ")"));
}

// A listening socket bound to `where`, and the port it got.
absl::StatusOr<std::pair<int, int>> Listen(const BindAddress& where) {
  const int fd = socket(where.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket", where);
  // A restarted process may bind the port of one whose connections linger
  // in TIME_WAIT; a port another socket listens on stays refused.
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd, reinterpret_cast<const struct sockaddr*>(&where.storage),
           where.length) != 0 ||
      listen(fd, kListenBacklog) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, "cannot bind", where);
  }
  struct sockaddr_storage bound = {};
  socklen_t length = sizeof bound;
  if (getsockname(fd, reinterpret_cast<struct sockaddr*>(&bound), &length) !=
      0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, "getsockname", where);
  }
  const uint16_t port =
      bound.ss_family == AF_INET6
          ? reinterpret_cast<const struct sockaddr_in6*>(&bound)->sin6_port
          : reinterpret_cast<const struct sockaddr_in*>(&bound)->sin_port;
  return std::make_pair(fd, static_cast<int>(ntohs(port)));
}

// Waits until `fd` is ready for `events` (POLLIN or POLLOUT), for at most
// kIdleTimeout and never past `deadline`. False when it did not become
// ready in time.
bool WaitReady(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = std::min(kIdleTimeout, deadline - absl::Now());
    if (left <= absl::ZeroDuration()) return false;
    struct pollfd entry = {fd, events, 0};
    const int ready = poll(&entry, 1,
                           static_cast<int>(absl::ToInt64Milliseconds(
                               absl::Ceil(left, absl::Milliseconds(1)))));
    if (ready < 0 && errno == EINTR) continue;
    // POLLHUP and POLLERR count as ready: the recv or send that follows
    // reports them.
    return ready > 0;
  }
}

// Receives what is there once `fd` is readable; <= 0 as recv() when the
// client left or `deadline` passed (then 0, errno ETIMEDOUT).
ssize_t ReceiveBy(int fd, char* buffer, size_t size, absl::Time deadline) {
  while (true) {
    if (!WaitReady(fd, POLLIN, deadline)) {
      errno = ETIMEDOUT;
      return -1;
    }
    const ssize_t n = recv(fd, buffer, size, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      continue;
    }
    return n;
  }
}

// Sends `bytes`, giving up when the client leaves or `deadline` passes.
void SendAll(int fd, absl::string_view bytes, absl::Time deadline) {
  while (!bytes.empty()) {
    const ssize_t sent =
        send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitReady(fd, POLLOUT, deadline)) return;  // Too slow a reader.
      continue;
    }
    if (sent <= 0) return;  // The client left: nothing to do.
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
}

// Writes one response, all of it by `deadline`.
void Respond(int fd, absl::Time deadline, int status, absl::string_view reason,
             absl::string_view content_type, absl::string_view body,
             bool send_body, absl::string_view extra_headers = "") {
  std::string response = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n",
      extra_headers, "\r\n");
  if (send_body) response.append(body.data(), body.size());
  SendAll(fd, response, deadline);
}

enum class HeadRead { kComplete, kLeft, kTooLarge, kTooLate };

// Reads until the end of the request head, which must be complete by
// `deadline`.
HeadRead ReadRequestHead(int fd, absl::Time deadline, std::string* head) {
  char buffer[4096];
  while (head->find("\r\n\r\n") == std::string::npos &&
         head->find("\n\n") == std::string::npos) {
    if (head->size() > kMaxRequestHead) return HeadRead::kTooLarge;
    const ssize_t n = ReceiveBy(fd, buffer, sizeof buffer, deadline);
    if (n < 0 && errno == ETIMEDOUT) return HeadRead::kTooLate;
    if (n <= 0) return HeadRead::kLeft;
    head->append(buffer, static_cast<size_t>(n));
  }
  return HeadRead::kComplete;
}

// Signals the end of the response, then reads what the client still sends
// until it closes, so that the close that follows is not a reset.
void FinishResponse(int fd) {
  shutdown(fd, SHUT_WR);
  const absl::Time deadline = absl::Now() + kDrainTime;
  char buffer[4096];
  size_t drained = 0;
  while (drained < kMaxDrainedBytes) {
    const ssize_t n = ReceiveBy(fd, buffer, sizeof buffer, deadline);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Exposer>> Exposer::Start(
    const ExposerOptions& options, const Registry* registry) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", options.port, " is outside [0, 65535]"));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics threads must be >= 1, not ", options.threads));
  }
  if (options.request_deadline <= absl::ZeroDuration() ||
      options.response_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics request and response deadlines must be > 0, not ",
                     absl::FormatDuration(options.request_deadline), " and ",
                     absl::FormatDuration(options.response_deadline)));
  }
  absl::StatusOr<BindAddress> where =
      ParseBindAddress(options.address, options.port);
  if (!where.ok()) return where.status();
  absl::StatusOr<std::pair<int, int>> listening = Listen(*where);
  if (!listening.ok()) return listening.status();
  std::unique_ptr<Exposer> exposer(
      new Exposer(registry, options, listening->first, listening->second));
  for (int i = 0; i < options.threads; ++i) {
    exposer->threads_.emplace_back([self = exposer.get()] { self->Serve(); });
  }
  return exposer;
}

Exposer::~Exposer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // A client that has not sent its whole request gets end-of-file; a
    // response being written goes on.
    for (const int connection : open_) shutdown(connection, SHUT_RD);
  }
  // Wakes every thread blocked in accept(), which then fails: the threads
  // finish what they are answering and return.
  shutdown(listen_fd_, SHUT_RDWR);
  for (std::thread& thread : threads_) thread.join();
  close(listen_fd_);
}

bool Exposer::Track(int connection) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    close(connection);
    return false;
  }
  open_.insert(connection);
  return true;
}

void Exposer::Release(int connection) {
  {
    absl::MutexLock lock(&mu_);
    open_.erase(connection);
  }
  close(connection);
}

void Exposer::Serve() {
  while (true) {
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection >= 0) {
      const absl::Time accepted = absl::Now();
      if (!Track(connection)) return;
      Answer(connection, accepted);
      Release(connection);
      continue;
    }
    switch (errno) {
      case EINTR:
      case ECONNABORTED:
      case EPROTO:
        continue;  // That one connection failed; the next may not.
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM:
        // Out of descriptors or memory for now: try again shortly rather
        // than spinning.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      default:
        return;  // EINVAL: the destructor shut the socket down.
    }
  }
}

void Exposer::Answer(int connection, absl::Time accepted) const {
  std::string head;
  switch (ReadRequestHead(connection, accepted + request_deadline_, &head)) {
    case HeadRead::kComplete:
      break;
    case HeadRead::kTooLarge:
      Respond(connection, absl::Now() + response_deadline_, 431,
              "Request Header Fields Too Large", kPlainText,
              "the request head is over 16 KiB\n", true);
      FinishResponse(connection);
      return;
    case HeadRead::kLeft:
      FinishResponse(connection);
      return;
    case HeadRead::kTooLate:
      return;  // Closed unanswered: draining would wait on it again.
  }
  const absl::Time deadline = absl::Now() + response_deadline_;
  absl::string_view request_line(head);
  request_line = request_line.substr(0, request_line.find('\n'));
  if (!request_line.empty() && request_line.back() == '\r') {
    request_line.remove_suffix(1);
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || parts[0].empty() ||
      !absl::StartsWith(parts[2], "HTTP/")) {
    Respond(connection, deadline, 400, "Bad Request", kPlainText,
            "not an HTTP/1.x request line\n", true);
    FinishResponse(connection);
    return;
  }
  const absl::string_view method = parts[0];
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  const bool head_only = method == "HEAD";
  if (path != "/metrics") {
    Respond(connection, deadline, 404, "Not Found", kPlainText,
            "not found: metrics are served at /metrics\n", !head_only);
  } else if (method != "GET" && !head_only) {
    Respond(connection, deadline, 405, "Method Not Allowed", kPlainText,
            "use GET or HEAD\n", true, "Allow: GET, HEAD\r\n");
  } else {
    Respond(connection, deadline, 200, "OK", kTextContentType,
            SerializeText(registry_->Collect()), !head_only);
  }
  FinishResponse(connection);
}

}  // namespace gradwire::metrics
