// Plain HTTP on 127.0.0.1 for the command-line tool: asking the
// dashboard's Prometheus whether it is ready (dashboard.h) and scraping a
// shard's /metrics (shard_metrics_summary.h), and picking a free port.
// HTTP/1.0 without keep-alive: one request per connection, the answer read
// until the server closes it. No TLS; the metrics endpoints are plaintext.
//
// Thread safety: the functions may be called from any thread.
#ifndef GRADWIRE_CLI_LOOPBACK_HTTP_H_
#define GRADWIRE_CLI_LOOPBACK_HTTP_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gradwire::cli {

struct HttpAnswer {
  // The status code (200, 404, ...) and its line without "\r\n".
  int status = 0;
  std::string status_line;
  // What follows the head's blank line.
  std::string body;
};

// One GET of http://127.0.0.1:<port><path>, the whole answer within
// `timeout`. UNAVAILABLE naming the URL when the connection is refused or
// fails, the answer is empty or not HTTP, or it is larger than `max_bytes`;
// DEADLINE_EXCEEDED when the server does not finish in time. Any status
// code is an answer: the caller checks HttpAnswer::status.
absl::StatusOr<HttpAnswer> HttpGetLoopback(int port, absl::string_view path,
                                           absl::Duration timeout,
                                           size_t max_bytes = 64 << 20);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
// released); another process may take it before the caller's server binds
// it, which then fails to start with the reason in its log.
absl::StatusOr<int> PickFreeLoopbackPort();

}  // namespace gradwire::cli

#endif  // GRADWIRE_CLI_LOOPBACK_HTTP_H_
