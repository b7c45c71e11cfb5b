// A tiny model for integration tests: chunks with random initial values,
// Init requests for it, wire helpers, and the dense SGD reference that the
// shard's results are compared against.
#ifndef GRADWIRE_TESTS_INTEGRATION_TEST_MODEL_H_
#define GRADWIRE_TESTS_INTEGRATION_TEST_MODEL_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gradwire/v1/parameter_server.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gradwire::testing {

inline constexpr float kLearningRate = 0.1f;

struct TestChunk {
  uint64_t key = 0;
  std::vector<float> initial;
};

// One chunk per entry of `numels` (keys 0, 1, ...), values uniform in
// [-1, 1) drawn from `seed`.
std::vector<TestChunk> MakeChunks(const std::vector<size_t>& numels,
                                  uint64_t seed);

// Values uniform in [-scale, scale) drawn from `seed`.
std::vector<float> RandomValues(size_t n, uint64_t seed, float scale = 1.0f);

// A one-shard config: plain SGD at kLearningRate, `mode`, `num_workers`.
v1::TrainingConfig SgdConfig(uint32_t num_workers, v1::ConsistencyMode mode);

v1::InitRequest MakeInit(const v1::TrainingConfig& config,
                         const std::vector<TestChunk>& chunks,
                         uint32_t worker_id);

// Inits the shard behind `stub` once per worker 0..num_workers-1 with
// SgdConfig(num_workers, BSP) and `chunks`; the first failure.
absl::Status InitBspWorkers(v1::ParameterServer::Stub* stub,
                            const std::vector<TestChunk>& chunks,
                            uint32_t num_workers);

// Dense fp32 chunk data of `values`.
v1::ChunkData DenseData(const std::vector<float>& values);

// Decodes (validating) `data` of `numel` elements into dense floats.
absl::StatusOr<std::vector<float>> DecodeToDense(const v1::ChunkData& data,
                                                 uint64_t numel);

// Sets `context`'s deadline to now + `timeout`.
void SetTimeout(grpc::ClientContext* context,
                absl::Duration timeout = absl::Seconds(10));

// Pulls `keys` densely (allow_delta = false) after waiting for `min_step`.
// Returns the weights by key or the call's error.
absl::StatusOr<std::map<uint64_t, std::vector<float>>> PullDense(
    v1::ParameterServer::Stub* stub, uint32_t worker_id,
    const std::vector<TestChunk>& chunks, uint64_t min_step,
    absl::Duration timeout = absl::Seconds(10));

// The grpc::Status as an absl::Status, for matchers and messages.
absl::Status ToAbsl(const grpc::Status& status);

// Plain SGD on dense weights, as the shard runs it for BSP: the pushes of a
// step are averaged (each scaled by 1 / num_workers, summed in push order)
// and w += -lr * mean.
class DenseReference {
 public:
  DenseReference(const std::vector<TestChunk>& chunks, uint32_t num_workers);

  // Adds one worker's decoded gradient of `key` to the current step.
  void AddPush(uint64_t key, const std::vector<float>& gradient);
  // Applies the step to every chunk that received pushes.
  void FinishStep();

  const std::vector<float>& weights(uint64_t key) const {
    return weights_.at(key);
  }

 private:
  const float share_;
  std::map<uint64_t, std::vector<float>> weights_;
  std::map<uint64_t, std::vector<float>> accumulators_;
};

// The largest |a[i] - b[i]| / max(1, |b[i]|); infinity when sizes differ.
double MaxRelativeDifference(const std::vector<float>& a,
                             const std::vector<float>& b);

}  // namespace gradwire::testing

#endif  // GRADWIRE_TESTS_INTEGRATION_TEST_MODEL_H_
