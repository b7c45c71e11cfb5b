// The layout of the tensors registered with gradwire.ParameterSync, as
// register() saw it, checked again before every call that reads or writes
// them.
//
// The C++ side reads a gradient and writes pulled weights through a raw
// float pointer and the element count it planned at register(). Python can
// change a registered tensor under it: `p.data = torch.zeros(2)` swaps the
// storage and size of the very tensor the plan holds, and `p.grad =
// g.expand(...)` gives a gradient whose elements are not numel() floats in
// a row. Either would make a step read or write past the tensor, so every
// step first compares what is cheap to compare (data pointer, element
// count, dtype, device, contiguity) and refuses with a ValueError instead.
//
// Thread safety: Record and Check read the tensors' metadata, which the
// caller must not change concurrently (both run with the GIL held, as every
// change from Python does).
#ifndef GRADWIRE_PYTHON_REGISTERED_TENSORS_H_
#define GRADWIRE_PYTHON_REGISTERED_TENSORS_H_

#include <torch/torch.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace gradwire {

class RegisteredTensors {
 public:
  // Remembers each parameter's layout now (after a successful register()).
  // Keeps the tensors: they share their TensorImpl with the Python
  // parameters, so a later `p.data = ...` shows through them.
  void Record(const std::vector<std::pair<std::string, torch::Tensor>>& named);

  // OK when every parameter still has its registered data pointer, element
  // count, dtype, device and contiguity, and every defined gradient is a
  // contiguous tensor of the parameter's dtype, device and element count.
  // INVALID_ARGUMENT otherwise, naming the parameter ("parameter 1
  // (fc.weight)"), what changed and what was registered. OK before Record.
  absl::Status CheckAll() const;
  // The same for parameter `index` alone; INVALID_ARGUMENT for an index out
  // of range once recorded.
  absl::Status Check(size_t index) const;

  size_t size() const { return registered_.size(); }

 private:
  struct Layout {
    std::string name;
    torch::Tensor tensor;
    const void* data = nullptr;
    int64_t numel = 0;
    c10::ScalarType dtype = c10::ScalarType::Float;
    c10::Device device = c10::Device(c10::kCPU);
  };

  static absl::Status CheckOne(size_t index, const Layout& registered);

  std::vector<Layout> registered_;
};

}  // namespace gradwire

#endif  // GRADWIRE_PYTHON_REGISTERED_TENSORS_H_
