// Serves a Registry over HTTP at /metrics in the Prometheus text format,
// with civetweb.
//
//   GET or HEAD /metrics  200, Content-Type kTextContentType, the text of
//                         SerializeText(registry->Collect())
//   other methods         405 on /metrics
//   any other path        404
//
// Each request collects the registry afresh; there is no cache. The server
// runs its own small thread pool (ExposerOptions::threads), so a slow
// scraper never holds up the caller's threads. Connections are closed after
// each response.
//
// Thread safety: port() and address() may be called from any thread; the
// destructor must not run concurrently with them.
#ifndef GRADWIRE_COMMON_METRICS_EXPOSER_H_
#define GRADWIRE_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/metrics/registry.h"

struct mg_connection;
struct mg_context;

namespace gradwire::metrics {

struct ExposerOptions {
  // A numeric IPv4 address to bind (0.0.0.0: every interface). IPv6
  // addresses work only when the installed civetweb was built with IPv6
  // (Debian 12's was not); otherwise they are refused with a message.
  std::string address = "0.0.0.0";
  // TCP port in [0, 65535]; 0 lets the OS pick one (see Exposer::port()).
  int port = 0;
  // Threads that serve requests, >= 1. Scrapes are rare; two let a second
  // scraper through while the first one's connection is slow.
  int threads = 2;
};

class Exposer {
 public:
  // Starts serving `registry`, which is not owned and must outlive the
  // Exposer. INVALID_ARGUMENT for an address that is not a numeric IP, a
  // port outside [0, 65535] or threads < 1; UNAVAILABLE, naming the address
  // and the system's reason, when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<Exposer>> Start(
      const ExposerOptions& options, const Registry* registry);

  // Stops serving; waits for requests in progress to finish.
  ~Exposer();
  Exposer(const Exposer&) = delete;
  Exposer& operator=(const Exposer&) = delete;

  // The bound port: the OS's choice when options.port was 0.
  int port() const { return port_; }
  // The bound address, as given in the options.
  const std::string& address() const { return address_; }

 private:
  Exposer(const Registry* registry, std::string address)
      : registry_(registry), address_(std::move(address)) {}
  // civetweb's begin_request callback: answers every request itself.
  static int HandleRequest(struct mg_connection* connection);

  // Constant after Start.
  const Registry* const registry_;
  const std::string address_;
  struct mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_EXPOSER_H_
