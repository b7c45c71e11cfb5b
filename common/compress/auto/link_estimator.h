// The link's rate and latency, estimated from the transfers a worker makes
// anyway: each push and pull, its payload bytes and its seconds. Nothing
// is configured and nothing extra is sent.
//
// A transfer of b bytes takes at least latency + b / rate, and often more
// (a BSP pull waits for the slowest worker; a push waits for the shard), so
// the estimate follows the lower envelope of the recent transfers, which
// waiting only lifts:
//   - the quickest transfer s of the last `window` anchors the line;
//   - of the transfers at least twice its size, the one that makes the
//     line flattest (the fastest rate) sets the slope: rate = 1 / slope,
//     latency = t_s - b_s * slope (within [0, t_s]);
//   - without such a transfer (all of a size), latency is 0 and the rate
//     the fastest b / t, which counts the latency in the rate (it errs
//     on the slow side);
//   - the rate is an EWMA (weight `smoothing`) of those windowed rates, so
//     that one fast burst moves it by a share only.
//
// Thread safety: thread-safe (a worker's push and pull threads both
// observe).
#ifndef GRADWIRE_COMMON_COMPRESS_AUTO_LINK_ESTIMATOR_H_
#define GRADWIRE_COMMON_COMPRESS_AUTO_LINK_ESTIMATOR_H_

#include <cstdint>
#include <deque>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gradwire {

struct LinkEstimate {
  // Payload bytes per second.
  double bytes_per_second = 0;
  // Seconds a transfer costs whatever its size.
  double latency_seconds = 0;
};

struct LinkEstimatorOptions {
  // Transfers the latency and the largest rate sample are taken over.
  int window = 16;
  // EWMA weight of each new windowed rate, in (0, 1].
  double smoothing = 0.3;
};

class LinkEstimator {
 public:
  explicit LinkEstimator(LinkEstimatorOptions options = {});

  // One transfer of `bytes` payload bytes that took `seconds`. Transfers
  // of no bytes or no time are ignored.
  void Observe(uint64_t bytes, double seconds);

  // The estimate; none before the first transfer.
  std::optional<LinkEstimate> Current() const;

 private:
  struct Transfer {
    double bytes;
    double seconds;
  };

  const LinkEstimatorOptions options_;
  mutable absl::Mutex mu_;
  std::deque<Transfer> recent_ ABSL_GUARDED_BY(mu_);
  std::optional<LinkEstimate> estimate_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_AUTO_LINK_ESTIMATOR_H_
