"""gradwire.ParameterSync: the C++ ParameterSync plus the extension's
gradient hooks (gradwire._C.GradientHooks), which push each parameter's
gradient as soon as backward() has finished it, and forward pre-hooks that
let each layer wait for its own pulled weights through the extension's
gradwire._C.LayerGate (pull ahead).

This class takes the keywords as the package passes them
(DistributedOptimizer's shards side spreads its compression's keywords);
gradwire.ParameterSync (_public_sync.py) is the one a script makes, which
warns about the old forms first."""

from gradwire import _C, _env, _metrics, _renamed, _state_dict
from gradwire.compression import KEYS as _COMPRESSION_KEYS
from gradwire.compression import Compression


def _gate_modules(gate, model):
    """A forward pre-hook on every submodule of ``model`` that holds
    registered parameters of its own: before the submodule runs, the
    extension's LayerGate waits (without the GIL) for their pulled weights,
    so that the forward pass waits for each layer's, not the whole
    step's. Returns the hooks' handles."""
    handles = []
    for module in model.modules():
        own = list(module.parameters(recurse=False))
        if not gate.holds(own):
            continue

        def hook(_module, _inputs, own=own):
            gate.before_layer(own)

        handles.append(module.register_forward_pre_hook(hook))
    if not handles:
        raise ValueError(
            "pull_ahead: the model holds none of the registered parameters")
    return handles


def _remove(handles):
    for handle in handles:
        handle.remove()


def _resolve_options(options):
    """The extension's keywords: ``compression`` (a gradwire.Compression or
    dict) spread into them, the shards and ranks from the environment
    (gradwire.init()) when ``shards`` is not given, and node_rank and
    num_nodes under the extension's names (worker_id, num_workers)."""
    options = dict(options)
    compression = options.pop("compression", None)
    if compression is not None:
        for key in _COMPRESSION_KEYS:
            if key in options:
                raise ValueError(f"{key}: given both as a keyword and in "
                                 "compression; set it in compression")
        options.update(Compression.of(compression).sync_options())
    return _renamed.extension_keywords(_env.with_environment(options))


class ParameterSync(_C.ParameterSync):
    __doc__ = _C.ParameterSync.__doc__ + """
``compression`` (a gradwire.Compression or a dict of its keywords) sets
the compression keywords in one object. ``node_rank`` and ``num_nodes``
are the Python names of worker_id and num_workers: this host's index and
the number of hosts. Without ``shards``, the shards, node_rank,
num_nodes, local ranks and TLS files come from the environment
(gradwire.init(), gradwire run).
"""

    def __init__(self, **options):
        resolved = _resolve_options(options)
        # Before connecting: a sync records into the endpoint it finds.
        _metrics.serve_from_environment()
        try:
            super().__init__(**resolved)
        except ValueError as error:
            message = _renamed.python_message(str(error))
            if message == str(error):
                raise
            raise ValueError(message) from None
        # For state_dict(): the extension does not hand them back.
        self._node_rank = resolved.get("worker_id", 0)
        self._num_nodes = resolved.get("num_workers", 1)
        self._tensors = []
        self._hooks = None
        self._gate_handles = []
        self._epoch = 0

    def register(self, parameters, *, overlap=True,
                 backward_passes_per_step=1, uncompressed=None):
        """Declares the parameters and Inits every shard with their values.

        Args:
          parameters: ``model.named_parameters()``, a dict name -> tensor, or
            a list of (name, tensor) pairs. Contiguous float32 CPU or CUDA
            tensors; every worker registers the same names and shapes in the
            same order. The shards keep the first worker's values: on return
            every tensor holds them.
          overlap: push each parameter's gradient as soon as backward() has
            finished it (a hook on its AccumulateGrad node), so that
            communication hides behind the rest of the backward pass. The
            compressed gradients and the weights are the same as without
            overlap; a step's chunks may travel in several requests, which
            adds their headers (tens of bytes a step).
            Needs local_size 1. Gradients must not change between
            backward() and step(): step() raises gradwire.Error if one did.
          backward_passes_per_step: with gradient accumulation, the number
            of backward() calls per step; the gradient is pushed after the
            last.
          uncompressed: one bool per parameter: True pushes that one
            without compression (every nonzero element at fp32, no error
            feedback). Default: every parameter is compressed.

        Resumes at the step the shards recorded for this worker (after a
        restart). Raises ValueError for a bad tensor or list,
        gradwire.Error when a shard refuses or cannot be reached.
        """
        named = list(parameters.items()) if hasattr(parameters, "items") \
            else list(parameters)
        if uncompressed is None:
            uncompressed = []
        elif len(uncompressed) != len(named):
            raise ValueError(f"uncompressed: {len(uncompressed)} flags for "
                             f"{len(named)} parameters")
        hooks = None
        if overlap:
            # Made first: a bad backward_passes_per_step changes nothing
            # (a bad list raises register()'s ValueError here).
            hooks = _C.GradientHooks(self, named, backward_passes_per_step)
            hooks.set_epoch(self._epoch)
        try:
            self._register(named, [bool(u) for u in uncompressed])
        except BaseException:
            if hooks is not None:
                hooks.remove()
            raise
        self._remove_overlap()
        self._tensors = [t for _, t in named]
        self._hooks = hooks
        return self

    def pull_ahead(self, model):
        """Pulls each parameter's new weights as soon as its gradient is
        pushed during backward() (needs ``register(..., overlap=True)``),
        and lets step() return without waiting for them: a forward
        pre-hook on every submodule of ``model`` that holds registered
        parameters waits for that submodule's weights alone, so the pulls
        overlap the rest of the backward pass and the first layers of the
        next forward pass. The weights are the same as without it.

        Parameters read outside ``model``'s forward pass (a checkpoint, a
        copy) need ``await_weights()`` first. Raises ValueError when the
        model holds none of the registered parameters."""
        if self._hooks is None:
            raise _C.Error(
                "FAILED_PRECONDITION: pull_ahead needs "
                "register(..., overlap=True): pulls follow the pushes "
                "made during backward()")
        handles = _gate_modules(_C.LayerGate(self, self._tensors), model)
        _remove(self._gate_handles)
        self._gate_handles = handles
        self._set_pull_ahead(True)
        return self

    def set_epoch(self, epoch):
        """Sets the epoch that compressor warm-up schedules (DGC) see, as
        ``DistributedSampler.set_epoch``: call it at the start of every
        epoch, since with overlap the pushes start before step()."""
        self._epoch = int(epoch)
        if self._hooks is not None:
            self._hooks.set_epoch(self._epoch)

    def step(self, epoch=None):
        """One step: pushes the compressed gradients (those that overlap
        did not push during backward()), waits for the step the
        consistency mode requires, and writes the shards' new weights into
        the registered tensors in place. ``epoch`` (default: the one
        set_epoch gave) feeds warm-up schedules. Raises gradwire.Error when
        a shard fails or a deadline passes; the step can be retried."""
        if epoch is not None:
            self.set_epoch(epoch)
        if self._hooks is not None:
            self._hooks.finish_step()
        super().step(self._epoch)
        return self

    def state_dict(self):
        """``{"gradwire": {...}}``: this node's compression state
        (error-feedback residuals, velocities), its place and the step it
        belongs to, in DistributedOptimizer's layout (_state_dict.py), to
        save with the model's checkpoint; each process saves its own. The
        shards' optimizer state is theirs (gradwire-server
        --checkpoint-dir)."""
        return {_state_dict.KEY: _state_dict.gradwire_part(
            self._node_rank, self._num_nodes, self.next_step,
            self._save_state())}

    def load_state_dict(self, state_dict):
        """Restores state_dict() (or the layout of the release before,
        ``{"next_step", "worker_state"}``) after a restart, right after
        register(). ValueError for another job's or node's state,
        gradwire.Error when the shards are at another step; nothing
        changes then."""
        ours, _ = _state_dict.split_worker_state(state_dict,
                                                 old_sync_layout=True)
        self._load_state(ours["worker_state"])

    def _remove_overlap(self):
        if self._hooks is not None:
            self._hooks.remove()
            self._hooks = None
        _remove(self._gate_handles)
        self._gate_handles = []

    def close(self):
        self._remove_overlap()
        super().close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
