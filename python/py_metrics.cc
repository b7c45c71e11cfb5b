#include "python/py_metrics.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/exposer.h"
#include "common/metrics/process_metrics.h"
#include "common/port_file.h"

namespace py = pybind11;

namespace gradwire {
namespace {

// Lives until the process exits: the syncs keep pointers into the registry,
// and the endpoint must answer until the end (never destroyed, so no
// destructor races Python's shutdown).
struct Endpoint {
  metrics::Registry registry;
  std::unique_ptr<metrics::ProcessMetrics> process;
  std::unique_ptr<metrics::Exposer> exposer;
};

std::atomic<Endpoint*> served{nullptr};

[[noreturn]] void Raise(const absl::Status& status) {
  if (absl::IsInvalidArgument(status) || absl::IsOutOfRange(status)) {
    throw py::value_error(std::string(status.message()));
  }
  throw std::runtime_error(status.ToString());
}

int ServeMetrics(const std::string& address, int port,
                 const std::string& port_file) {
  if (Endpoint* endpoint = served.load()) return endpoint->exposer->port();
  if (port < 0 || port > 65535) {
    throw py::value_error(absl::StrCat("port: ", port,
                                       " is not a TCP port (0 to 65535; 0 "
                                       "picks a free one)"));
  }
  auto endpoint = std::make_unique<Endpoint>();
  auto process = metrics::ProcessMetrics::Register(&endpoint->registry);
  if (!process.ok()) Raise(process.status());
  endpoint->process = *std::move(process);
  metrics::ExposerOptions options;
  options.address = address;
  options.port = port;
  auto exposer = metrics::Exposer::Start(options, &endpoint->registry);
  if (!exposer.ok()) Raise(exposer.status());
  endpoint->exposer = *std::move(exposer);
  const int bound = endpoint->exposer->port();
  if (!port_file.empty()) {
    if (absl::Status s = WritePortFile(port_file, bound); !s.ok()) Raise(s);
  }
  served.store(endpoint.release());
  return bound;
}

}  // namespace

metrics::Registry* ServedRegistry() {
  Endpoint* endpoint = served.load();
  return endpoint == nullptr ? nullptr : &endpoint->registry;
}

void DefineMetrics(py::module_& m) {
  m.def("serve_metrics", &ServeMetrics, py::arg("address") = "127.0.0.1",
        py::arg("port") = 0, py::arg("port_file") = "",
        "Serves this process's worker and process metrics at "
        "http://ADDRESS:PORT/metrics (port 0: a free one, written to "
        "port_file when given) and returns the port. Once per process: "
        "later calls return the first port. ParameterSyncs connected "
        "afterwards record into it.");
}

}  // namespace gradwire
