#include "cli/dashboard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// `targets` as a YAML flow list of quoted strings.
std::string QuotedList(const std::vector<std::string>& targets) {
  std::vector<std::string> quoted;
  for (const std::string& target : targets) {
    quoted.push_back(absl::StrCat("\"", target, "\""));
  }
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

std::string Seconds(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Seconds(d), "s");
}

}  // namespace

std::string DashboardUrl(int port) {
  return absl::StrCat("http://127.0.0.1:", port, "/consoles/gradwire.html");
}

std::string PrometheusConfig(const std::vector<std::string>& shard_targets,
                             const std::string& worker_targets_file,
                             absl::Duration scrape_interval) {
  // The job names are those of deploy/prometheus/prometheus.yml, so that the
  // consoles work the same on both.
  return absl::StrCat(
      "# Written by gradwire local --dashboard for this run.\n"
      "global:\n"
      "  scrape_interval: ",
      Seconds(scrape_interval),
      "\n  scrape_timeout: ", Seconds(scrape_interval),
      "\n"
      "scrape_configs:\n"
      "  - job_name: gradwire-shard\n"
      "    static_configs:\n"
      "      - targets: ",
      QuotedList(shard_targets),
      "\n"
      "  - job_name: gradwire-worker\n"
      "    file_sd_configs:\n"
      "      - files: ",
      QuotedList({worker_targets_file}),
      "\n"
      "        refresh_interval: 5s\n");
}

std::string FileDiscoveryTargets(const std::vector<std::string>& targets) {
  return absl::StrCat("[{\"targets\": [",
                      absl::StrJoin(targets, ", ",
                                    [](std::string* out, const std::string& t) {
                                      absl::StrAppend(out, "\"", t, "\"");
                                    }),
                      "], \"labels\": {}}]\n");
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out.good()) {
      return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot rename ", temporary, " to ", path, ": ", error.message()));
  }
  return absl::OkStatus();
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

SpawnOptions PrometheusCommand(const DashboardOptions& options,
                               const RunDirectory& run, int port) {
  SpawnOptions spawn;
  spawn.argv = {options.prometheus,
                "--config.file=" + run.PrometheusConfig(),
                "--storage.tsdb.path=" + run.PrometheusData(),
                absl::StrCat("--web.listen-address=127.0.0.1:", port),
                "--web.console.templates=" + options.consoles,
                "--web.console.libraries=" + options.consoles + "/lib",
                "--log.level=warn"};
  spawn.stdout_path = spawn.stderr_path = run.PrometheusLog();
  return spawn;
}

absl::Status CheckPrometheusReady(int port, absl::Duration timeout) {
  Socket s;
  if (s.fd() < 0) return absl::ErrnoToStatus(errno, "socket");
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
      "GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(s.fd(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError("sending GET /-/ready failed");
  }
  // The status line is all that matters: "HTTP/1.x 200 ...".
  char answer[64] = {};
  const ssize_t n = recv(s.fd(), answer, sizeof(answer) - 1, 0);
  if (n <= 0) return absl::UnavailableError("no answer to GET /-/ready");
  const std::string status_line(answer, static_cast<size_t>(n));
  if (!absl::StartsWith(status_line, "HTTP/1.0 200") &&
      !absl::StartsWith(status_line, "HTTP/1.1 200")) {
    return absl::UnavailableError(absl::StrCat(
        "GET /-/ready: ", status_line.substr(0, status_line.find('\r'))));
  }
  return absl::OkStatus();
}

}  // namespace gradwire::cli
