#include "python/registered_tensors.h"

#include <torch/csrc/utils/tensor_dtypes.h>

#include "absl/strings/str_format.h"

namespace gradwire {
namespace {

std::string Describe(c10::ScalarType dtype, const c10::Device& device,
                     int64_t numel) {
  // Python's names: "float32", not c10's "Float".
  return absl::StrFormat("%d %s elements on %s", numel,
                         torch::utils::getDtypeNames(dtype).first,
                         device.str());
}

}  // namespace

void RegisteredTensors::Record(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  registered_.clear();
  for (const auto& [name, tensor] : named) {
    registered_.push_back({name, tensor, tensor.data_ptr(), tensor.numel(),
                           tensor.scalar_type(), tensor.device()});
  }
}

absl::Status RegisteredTensors::CheckAll() const {
  for (size_t i = 0; i < registered_.size(); ++i) {
    if (absl::Status s = CheckOne(i, registered_[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RegisteredTensors::Check(size_t index) const {
  if (registered_.empty()) return absl::OkStatus();
  if (index >= registered_.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("parameter index %d: only %d are registered", index,
                        registered_.size()));
  }
  return CheckOne(index, registered_[index]);
}

absl::Status RegisteredTensors::CheckOne(size_t index, const Layout& r) {
  const torch::Tensor& p = r.tensor;
  const auto refuse = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "parameter %d (%s) changed since register(): %s; registered: %s at "
        "%p. Change a registered parameter in place (p.data.copy_(...)) or "
        "register the model again",
        index, r.name, what, Describe(r.dtype, r.device, r.numel), r.data));
  };
  if (p.scalar_type() != r.dtype || p.device() != r.device ||
      p.numel() != r.numel) {
    return refuse(absl::StrFormat(
        "it now holds %s", Describe(p.scalar_type(), p.device(), p.numel())));
  }
  if (!p.is_contiguous()) return refuse("it is no longer contiguous");
  if (p.data_ptr() != r.data) {
    return refuse(absl::StrFormat("its data moved to %p (p.data was replaced)",
                                  p.data_ptr()));
  }
  const torch::Tensor& g = p.grad();
  if (!g.defined()) return absl::OkStatus();
  if (g.scalar_type() != r.dtype || g.device() != r.device ||
      g.numel() != r.numel || !g.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "parameter %d (%s): its gradient is %s%s; a step needs %s in a "
        "contiguous tensor (not expanded or strided)",
        index, r.name, Describe(g.scalar_type(), g.device(), g.numel()),
        g.is_contiguous() ? "" : ", not contiguous",
        Describe(r.dtype, r.device, r.numel)));
  }
  return absl::OkStatus();
}

}  // namespace gradwire
