"""DistributedOptimizer's state dict: the wrapped optimizer's, plus under
"gradwire" this worker's compression state (error-feedback residuals,
velocities), its place in the job and the step it belongs to."""

KEY = "gradwire"


def with_worker_state(optimizer_state, worker_id, num_workers, next_step,
                      worker_state, low_rank=None):
    """`optimizer_state` (the wrapped optimizer's state dict) with
    gradwire's part added; `low_rank` is powersgd's state, where used."""
    optimizer_state[KEY] = {
        "worker_id": worker_id,
        "num_workers": num_workers,
        "next_step": next_step,
        "worker_state": worker_state,
    }
    if low_rank is not None:
        optimizer_state[KEY]["low_rank"] = low_rank
    return optimizer_state


def split_worker_state(state_dict):
    """(gradwire's part, the wrapped optimizer's state dict) of what
    with_worker_state() made. Raises ValueError without gradwire's part."""
    rest = dict(state_dict)
    ours = rest.pop(KEY, None)
    if ours is None:
        raise ValueError(
            "state_dict: no 'gradwire' entry; pass what "
            "DistributedOptimizer.state_dict() returned, not the wrapped "
            "optimizer's")
    return ours, rest
