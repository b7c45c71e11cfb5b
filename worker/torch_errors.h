// libtorch throws; gradwire's seams return statuses (DESIGN.md). Every
// public entry of the worker that calls into libtorch runs its body through
// CatchTorch, so that no libtorch exception crosses the API.
//
// Thread safety: stateless.
#ifndef GRADWIRE_WORKER_TORCH_ERRORS_H_
#define GRADWIRE_WORKER_TORCH_ERRORS_H_

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gradwire {

// Runs `body` (returning absl::Status) and returns its status, or INTERNAL
// "<what>: <exception message>" when it throws.
template <typename Body>
absl::Status CatchTorch(const char* what, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrFormat("%s: %s", what, e.what()));
  }
}

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_TORCH_ERRORS_H_
