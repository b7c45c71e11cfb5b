// Serves a Registry over HTTP at /metrics in the Prometheus text format.
//
//   GET or HEAD /metrics  200, Content-Type kTextContentType, the text of
//                         SerializeText(registry->Collect())
//   other methods         405 on /metrics
//   any other path        404 (a query string is ignored: /metrics?x=1 is
//                         /metrics)
//   a request it cannot   400; a request head over 16 KiB: 431
//   parse
//
// Each request collects the registry afresh; there is no cache. The server
// runs its own few threads (ExposerOptions::threads), each accepting and
// answering one connection at a time, so a slow scraper never holds up the
// caller's threads. Connections are closed after each response. One that
// sends nothing for 10 s is dropped, and so is one that has not sent its
// whole request head within ExposerOptions::request_deadline of being
// accepted (10 s), however steadily it trickles: slow clients cannot keep
// every thread, and so the endpoint, away from Prometheus. Writing a
// response is bounded the same way (response_deadline).
//
// A small HTTP/1.x server of its own: the process of a training worker
// links libtorch, whose BLAS (OpenBLAS) keeps ~60 KiB of static
// thread-local storage, and civetweb, which served this endpoint before,
// starts its threads with 100 KiB stacks, which glibc then refuses
// (EINVAL). These threads take the system's default stack.
//
// Thread safety: port() and address() may be called from any thread; the
// destructor must not run concurrently with them.
#ifndef GRADWIRE_COMMON_METRICS_EXPOSER_H_
#define GRADWIRE_COMMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace gradwire::metrics {

struct ExposerOptions {
  // A numeric IPv4 or IPv6 address to bind (0.0.0.0: every IPv4
  // interface; "::": every interface).
  std::string address = "0.0.0.0";
  // TCP port in [0, 65535]; 0 lets the OS pick one (see Exposer::port()).
  int port = 0;
  // Threads that serve requests, >= 1. Scrapes are rare; two let a second
  // scraper through while the first one's connection is slow.
  int threads = 2;
  // How long a connection has, from the moment it is accepted, to send its
  // whole request head, > 0. A client past it is closed unanswered, however
  // steadily it trickles bytes: without a total limit, two clients sending
  // a byte every few seconds would hold both threads for ever.
  absl::Duration request_deadline = absl::Seconds(10);
  // How long writing the response may take, from its first byte, > 0. A
  // client that reads too slowly is cut off, for the same reason.
  absl::Duration response_deadline = absl::Seconds(10);
};

class Exposer {
 public:
  // Starts serving `registry`, which is not owned and must outlive the
  // Exposer. INVALID_ARGUMENT for an address that is not a numeric IP, a
  // port outside [0, 65535] or threads < 1; UNAVAILABLE, naming the address
  // and the system's reason, when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<Exposer>> Start(
      const ExposerOptions& options, const Registry* registry);

  // Stops serving: no new connection is accepted, clients still sending
  // their request are cut off, and the responses being written are
  // finished.
  ~Exposer();
  Exposer(const Exposer&) = delete;
  Exposer& operator=(const Exposer&) = delete;

  // The bound port: the OS's choice when options.port was 0.
  int port() const { return port_; }
  // The bound address, as given in the options.
  const std::string& address() const { return address_; }

 private:
  Exposer(const Registry* registry, const ExposerOptions& options,
          int listen_fd, int port)
      : registry_(registry),
        address_(options.address),
        request_deadline_(options.request_deadline),
        response_deadline_(options.response_deadline),
        listen_fd_(listen_fd),
        port_(port) {}
  // One serving thread: accepts and answers connections until the
  // listening socket is shut down.
  void Serve();
  // Reads one request from `connection`, accepted at `accepted`, and
  // answers it within the deadlines; does not close it.
  void Answer(int connection, absl::Time accepted) const;
  // Registers an accepted connection so that the destructor can cut it
  // off; false (and the connection is closed) once stopping.
  bool Track(int connection);
  // Unregisters and closes a connection.
  void Release(int connection);

  // Constant after Start.
  const Registry* const registry_;
  const std::string address_;
  const absl::Duration request_deadline_;
  const absl::Duration response_deadline_;
  const int listen_fd_;
  const int port_;
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  // The connections being answered: closed only after leaving this set, so
  // that the destructor never shuts down a descriptor number reused since.
  absl::flat_hash_set<int> open_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_EXPOSER_H_
