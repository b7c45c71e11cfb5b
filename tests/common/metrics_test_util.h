// Helpers for the metrics tests (unit and integration): a minimal HTTP/1.1
// client over a plain socket, and `promtool check metrics`.
#ifndef GRADWIRE_TESTS_COMMON_METRICS_TEST_UTIL_H_
#define GRADWIRE_TESTS_COMMON_METRICS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace gradwire::metrics_test {

struct HttpResponse {
  int status = 0;
  // Header names lower-cased, values trimmed.
  std::map<std::string, std::string> headers;
  std::string body;
};

// Sends "`method` `path` HTTP/1.1" to 127.0.0.1:`port` and reads the whole
// response (the server closes the connection). 10 s socket timeouts.
inline absl::StatusOr<HttpResponse> HttpRequest(
    int port, absl::string_view path, absl::string_view method = "GET") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  struct timeval timeout = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  struct sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&address),
              sizeof address) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("connect to port ", port));
  }
  const std::string request =
      absl::StrCat(method, " ", path,
                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("cannot send the request");
  }
  std::string raw;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, n);
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no HTTP header in: ", raw));
  }
  HttpResponse response;
  response.body = raw.substr(head_end + 4);
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw).substr(0, head_end), "\r\n");
  const std::vector<absl::string_view> status_line =
      absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    response.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  return response;
}

// The samples of an exposition, keyed by everything before the value
// ("name{label=\"value\",...}" exactly as written); comments skipped.
inline std::map<std::string, double> ParseSamples(absl::string_view text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) {
      samples[std::string(line.substr(0, space))] = value;
    }
  }
  return samples;
}

struct PromtoolResult {
  int exit_code = -1;
  // stdout and stderr together.
  std::string output;
};

// Runs `promtool check metrics` on `text`. FAILED_PRECONDITION when
// promtool is not installed: the project installs it
// (scripts/install-deps.sh, Debian package "prometheus"), so its absence
// is an error of the machine, not a reason to skip.
inline absl::StatusOr<PromtoolResult> PromtoolCheckMetrics(
    const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "promtool is not installed: run scripts/install-deps.sh (Debian "
        "package prometheus)");
  }
  char path[] = "/tmp/gradwire-metrics-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return absl::ErrnoToStatus(errno, "mkstemp");
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) {
    unlink(path);
    return absl::DataLossError("cannot write the metrics text");
  }
  const std::string command =
      absl::StrCat("promtool check metrics < ", path, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    unlink(path);
    return absl::ErrnoToStatus(errno, "popen promtool");
  }
  PromtoolResult result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    result.output.append(buffer, n);
  }
  const int status = pclose(pipe);
  unlink(path);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace gradwire::metrics_test

#endif  // GRADWIRE_TESTS_COMMON_METRICS_TEST_UTIL_H_
