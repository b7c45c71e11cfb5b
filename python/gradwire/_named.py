"""The (name, parameter) pairs DistributedOptimizer registers, from what a
script passes as named_parameters."""

import torch


def named_from(optimizer, named_parameters):
    """(name, parameter) pairs, checked against the optimizer's groups."""
    in_optimizer = [p for group in optimizer.param_groups
                    for p in group["params"]]
    if named_parameters is None:
        return [(f"param.{i}", p) for i, p in enumerate(in_optimizer)]
    if isinstance(named_parameters, torch.nn.Module):
        named = list(named_parameters.named_parameters())
    elif hasattr(named_parameters, "items"):
        named = list(named_parameters.items())
    else:
        named = list(named_parameters)
    ids = {id(p) for p in in_optimizer}
    for name, p in named:
        if id(p) not in ids:
            raise ValueError(f"named_parameters: {name} is not in the "
                             "optimizer's param_groups")
    return named
