#include "bench/compress/torch_baseline.h"

#include <torch/torch.h>

#include <exception>
#include <string>

namespace gradwire::bench {

int SetTorchThreads(int threads) {
  at::set_num_threads(threads);
  return at::get_num_threads();
}

absl::StatusOr<Timing> MeasureTorchTopK(absl::Span<const float> data,
                                        uint64_t k,
                                        const TimingOptions& options) {
  try {
    // from_blob wants a non-const pointer; nothing below writes through it.
    const torch::Tensor x = torch::from_blob(
        const_cast<float*>(data.data()), {static_cast<int64_t>(data.size())},
        torch::TensorOptions().dtype(torch::kFloat32));
    return MeasureMedian(options, [&]() -> absl::Status {
      auto [values, indices] = x.abs().topk(static_cast<int64_t>(k), /*dim=*/-1,
                                            /*largest=*/true, /*sorted=*/false);
      KeepMemory(indices.data_ptr());
      return absl::OkStatus();
    });
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("torch topk: ") + e.what());
  }
}

}  // namespace gradwire::bench
