"""gradwire's part of a state dict, one layout for ParameterSync and
DistributedOptimizer (and the DDP hook, which holds a
DistributedOptimizer's). Under the key "gradwire":

  node_rank     this host's index (ParameterSync's node_rank)
  num_nodes     the number of hosts
  next_step     the step the state belongs to (next_step when saved)
  worker_state  bytes: the compression state of this node (error-feedback
                residuals, velocities) and the job's identity, which
                loading checks (worker/worker_state.h)
  low_rank      powersgd's state; DistributedOptimizer only, where used

ParameterSync.state_dict() is ``{"gradwire": part}``;
DistributedOptimizer.state_dict() is the wrapped optimizer's state dict
with ``"gradwire": part`` added. So ``state["gradwire"]["next_step"]``
reads either.

The layouts of the release before still load: DistributedOptimizer's
part named the host worker_id and num_workers, and ParameterSync saved
``{"next_step", "worker_state"}`` without the key. Old checkpoints are
files a script did not write by hand, so they load without a warning.
"""

KEY = "gradwire"

# Field names of the release before -> this layout's.
_OLD_FIELDS = {"worker_id": "node_rank", "num_workers": "num_nodes"}


def gradwire_part(node_rank, num_nodes, next_step, worker_state,
                  low_rank=None):
    """gradwire's part of a state dict (the module's doc); `low_rank` is
    powersgd's state, where used."""
    part = {"node_rank": node_rank, "num_nodes": num_nodes,
            "next_step": next_step, "worker_state": worker_state}
    if low_rank is not None:
        part["low_rank"] = low_rank
    return part


def with_worker_state(optimizer_state, node_rank, num_nodes, next_step,
                      worker_state, low_rank=None):
    """`optimizer_state` (the wrapped optimizer's state dict) with
    gradwire's part added under KEY."""
    optimizer_state[KEY] = gradwire_part(node_rank, num_nodes, next_step,
                                         worker_state, low_rank)
    return optimizer_state


def _current(part):
    """`part` with the field names of the release before renamed."""
    return {_OLD_FIELDS.get(key, key): value for key, value in part.items()}


def split_worker_state(state_dict, old_sync_layout=False):
    """(gradwire's part in this layout, the rest of the state dict).
    With `old_sync_layout` (ParameterSync), a dict of the release before
    without the key, ``{"next_step", "worker_state"}``, is gradwire's part
    and the rest is empty. Raises ValueError without gradwire's part."""
    rest = dict(state_dict)
    ours = rest.pop(KEY, None)
    if ours is not None:
        return _current(ours), rest
    if old_sync_layout and "worker_state" in rest:
        return {"next_step": rest.get("next_step"),
                "worker_state": rest["worker_state"]}, {}
    raise ValueError(
        "state_dict: no 'gradwire' entry; pass what state_dict() of the "
        "DistributedOptimizer or ParameterSync returned, not the wrapped "
        "optimizer's")
