// The /metrics endpoint of a Python training process (gradwire._C.
// serve_metrics): the same worker metrics that gradwire-worker serves
// (worker/worker_metrics.h) and the process metrics, in the Prometheus text
// format, for `gradwire run` and any Prometheus that scrapes the workers.
//
// One endpoint per process, started by the first serve_metrics() call and
// kept until the process exits; later calls return its port. Every
// ParameterSync connected after it records into its registry (several in
// one process share the families; counters with the same labels add up).
//
// Thread safety: serve_metrics() holds the GIL; ServedRegistry() may be
// called from any thread once serve_metrics() has returned.
#ifndef GRADWIRE_PYTHON_PY_METRICS_H_
#define GRADWIRE_PYTHON_PY_METRICS_H_

#include <pybind11/pybind11.h>

#include "common/metrics/registry.h"

namespace gradwire {

// The served registry; null until serve_metrics() succeeded.
metrics::Registry* ServedRegistry();

// Defines gradwire._C.serve_metrics(address, port, port_file) -> port.
void DefineMetrics(pybind11::module_& m);

}  // namespace gradwire

#endif  // GRADWIRE_PYTHON_PY_METRICS_H_
