#include "common/metrics/exposer.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/metrics/text_format.h"

namespace gradwire::metrics {
namespace {

// mg_check_feature bit of IPv6 support.
constexpr unsigned kCivetwebIpv6 = 8;

// civetweb tells why it could not bind only through its log callback, and
// at start-up without a connection, so the message cannot be routed through
// the context's user data. mg_start2 binds on the calling thread: a
// thread-local buffer catches the messages of that one call.
thread_local std::string* start_log = nullptr;

int LogMessage(const struct mg_connection*, const char* message) {
  // The first message is the specific one ("cannot bind to ...: 98
  // (Address already in use)"); civetweb follows it with a generic one.
  if (start_log != nullptr && start_log->empty()) *start_log = message;
  // Non-zero: civetweb writes nothing itself. Messages after start-up
  // (clients that hang up, say) are dropped: a scrape endpoint has no
  // business filling the server's log.
  return 1;
}

// civetweb's "listening_ports" value for `address` and `port`.
absl::StatusOr<std::string> ListeningPort(const std::string& address,
                                          int port) {
  unsigned char parsed[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, address.c_str(), parsed) == 1) {
    return absl::StrCat(address, ":", port);
  }
  if (inet_pton(AF_INET6, address.c_str(), parsed) != 1) {
    // civetweb would fall back to every interface for what it cannot
    // parse; a typo must not expose the endpoint more widely than asked.
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address \"", address, "\" is not a numeric IP address"));
  }
  if (mg_check_feature(kCivetwebIpv6) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address ", address,
                     ": the installed civetweb has no IPv6 support; use an "
                     "IPv4 address such as 0.0.0.0"));
  }
  return absl::StrCat("[", address, "]:", port);
}

void Respond(struct mg_connection* connection, int status,
             absl::string_view reason, absl::string_view content_type,
             absl::string_view body, bool send_body,
             absl::string_view extra_headers = "") {
  std::string response = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n",
      extra_headers, "\r\n");
  if (send_body) response.append(body.data(), body.size());
  mg_write(connection, response.data(), response.size());
}

constexpr absl::string_view kPlainText = "text/plain; charset=utf-8";

// Opens and at once closes a TCP connection to `address`:`port` (IPv4).
void KnockOnce(const std::string& address, int port) {
  struct sockaddr_in target = {};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &target.sin_addr) != 1) return;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<struct sockaddr*>(&target), sizeof target);
  close(fd);
}

// mg_stop(context), fast. civetweb's accept loop polls in slices of two
// seconds and sees the stop request only between them, so a plain mg_stop
// takes up to two seconds. A connection wakes the poll at once: while
// mg_stop runs, this knocks on the port every few milliseconds. An accepted
// knock is an empty connection, which a worker drops at once.
void StopQuickly(struct mg_context* context, const std::string& address,
                 int port) {
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    mg_stop(context);
    stopped.store(true);
  });
  const std::string knock_at = address == "0.0.0.0" ? "127.0.0.1" : address;
  while (!stopped.load()) {
    KnockOnce(knock_at, port);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
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
  absl::StatusOr<std::string> listening =
      ListeningPort(options.address, options.port);
  if (!listening.ok()) return listening.status();
  static std::once_flag library_initialised;
  std::call_once(library_initialised, [] { mg_init_library(0); });

  const std::string threads = absl::StrCat(options.threads);
  const char* config[] = {"listening_ports",
                          listening->c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          "10000",
                          nullptr};
  struct mg_callbacks callbacks = {};
  callbacks.begin_request = &Exposer::HandleRequest;
  callbacks.log_message = &LogMessage;
  std::unique_ptr<Exposer> exposer(new Exposer(registry, options.address));
  struct mg_init_data init = {&callbacks, exposer.get(), config};
  char error_text[256] = "";
  unsigned error_code = 0;
  struct mg_error_data error = {&error_code, error_text, sizeof error_text};
  std::string log;
  start_log = &log;
  exposer->context_ = mg_start2(&init, &error);
  start_log = nullptr;
  if (exposer->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ",
                                               *listening, ": ",
                                               log.empty() ? error_text : log));
  }
  struct mg_server_port port = {};
  if (mg_get_server_ports(exposer->context_, 1, &port) < 1) {
    return absl::InternalError(
        absl::StrCat("metrics server on ", *listening, " reports no port"));
  }
  exposer->port_ = port.port;
  return exposer;
}

Exposer::~Exposer() {
  if (context_ != nullptr) StopQuickly(context_, address_, port_);
}

int Exposer::HandleRequest(struct mg_connection* connection) {
  const struct mg_request_info* request = mg_get_request_info(connection);
  const auto* self =
      static_cast<const Exposer*>(mg_get_user_data(mg_get_context(connection)));
  const absl::string_view path =
      request->local_uri != nullptr ? request->local_uri : "";
  const absl::string_view method =
      request->request_method != nullptr ? request->request_method : "";
  const bool head = method == "HEAD";
  if (path != "/metrics") {
    Respond(connection, 404, "Not Found", kPlainText,
            "not found: metrics are served at /metrics\n", !head);
    return 404;
  }
  if (method != "GET" && !head) {
    Respond(connection, 405, "Method Not Allowed", kPlainText,
            "use GET or HEAD\n", true, "Allow: GET, HEAD\r\n");
    return 405;
  }
  Respond(connection, 200, "OK", kTextContentType,
          SerializeText(self->registry_->Collect()), !head);
  return 200;
}

}  // namespace gradwire::metrics
