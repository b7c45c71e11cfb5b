// gradwire._C.GradientHooks and gradwire._C.LayerGate: the worker library's
// GradientHooks (worker/gradient_hooks.h) and LayerGate
// (worker/layer_gate.h) over a gradwire.ParameterSync, for the Python
// package's overlap (register(..., overlap=True)) and pull ahead
// (pull_ahead(model)). The hooks are C++ hooks on the parameters'
// AccumulateGrad nodes: the libtorch that runs Python's backward() runs
// them, on autograd's threads, without the GIL. They take it only to raise
// an error, which then leaves backward() as ValueError (a registered tensor
// changed layout) or gradwire.Error (a pass too many, a refused push). The
// gate's waits run with the GIL released.
//
// Both hold the PySync they were made with (shared), so a hook that fires
// after the Python ParameterSync was dropped still finds it; after close()
// its calls fail with FAILED_PRECONDITION.
//
// Thread safety: as worker/gradient_hooks.h and worker/layer_gate.h; every
// method is called with the GIL held.
#ifndef GRADWIRE_PYTHON_PY_OVERLAP_H_
#define GRADWIRE_PYTHON_PY_OVERLAP_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "python/py_sync.h"

namespace gradwire {

// Adds GradientHooks and LayerGate to `m`, after ParameterSync (whose
// holder is std::shared_ptr<PySync>).
void DefineOverlap(pybind11::module_& m);

}  // namespace gradwire

#endif  // GRADWIRE_PYTHON_PY_OVERLAP_H_
