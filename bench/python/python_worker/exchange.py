"""The three ways to exchange gradients.

Each holds the plain model (.model) and what computes the loss (.forward:
the model, or DDP's wrapper), and offers zero_grad(), set_epoch(e),
step(epoch), next_step (steps done, resumed ones included), stats(),
describe() and close().
"""

import gradwire
import gradwire.torch
import torch


def setting_names(*groups):
    return tuple(s["name"] for s in gradwire.settings()
                 if s["keyword"] and s["group"] in groups)


COMPRESSION_FLAGS = setting_names("compression")
OPTIMIZER_FLAGS = setting_names("optimizer")
PULL_FLAGS = setting_names("pulls")
SYNC_FLAGS = tuple(
    name for name in setting_names("topology", "consistency", "chunks",
                                   "deadlines", "security")
    if name != "shards")
# The worker's flags name a host as gradwire-worker's do; the Python
# keywords call it a node.
PYTHON_NAMES = {"worker_id": "node_rank", "num_workers": "num_nodes"}


def sync_keywords(args, flags=SYNC_FLAGS):
    """The values of `flags` as ParameterSync's keywords."""
    return {PYTHON_NAMES.get(key, key): getattr(args, key) for key in flags}


def torch_optimizer(args, parameters):
    """--optimizer as a torch.optim optimizer, with the shards' meaning
    (adadelta: torch's, with its own rho and eps; --momentum unused)."""
    if args.optimizer == "adadelta":
        return torch.optim.Adadelta(parameters, lr=args.lr,
                                    weight_decay=args.weight_decay)
    if args.optimizer in ("adam", "adamw"):
        kind = torch.optim.Adam if args.optimizer == "adam" \
            else torch.optim.AdamW
        return kind(parameters, lr=args.lr, betas=(args.momentum, 0.999),
                    eps=1e-8, weight_decay=args.weight_decay)
    return torch.optim.SGD(
        parameters, lr=args.lr,
        momentum=0.0 if args.optimizer == "sgd" else args.momentum,
        nesterov=args.optimizer == "nesterov",
        weight_decay=args.weight_decay)


class GradwireSync:
    """gradwire.ParameterSync: sync.step() sends the gradients and brings
    back the shards' new weights."""

    def __init__(self, args, model):
        options = sync_keywords(args, OPTIMIZER_FLAGS + SYNC_FLAGS)
        compression = {key: getattr(args, key)
                       for key in COMPRESSION_FLAGS + PULL_FLAGS}
        self.model = model
        self.sync = gradwire.ParameterSync(
            shards=[s for s in args.shards.split(",") if s],
            compression=gradwire.Compression(**compression), **options)
        self.sync.register(model.named_parameters(), overlap=args.overlap)
        if args.overlap and args.pull_ahead:
            self.sync.pull_ahead(model)
        self.forward = model

    @property
    def next_step(self):
        return self.sync.next_step

    def set_epoch(self, epoch):
        self.sync.set_epoch(epoch)

    def zero_grad(self):
        self.model.zero_grad()

    def step(self, epoch):
        self.sync.step(epoch)

    def settle(self):
        # With pull ahead the last step's pulls may still be landing.
        self.sync.await_weights()

    def stats(self):
        return self.sync.stats.as_dict()

    def describe(self):
        return self.sync.optimizer_placement

    def close(self):
        self.sync.close()


class GradwireOptimizer:
    """gradwire.torch.DistributedOptimizer around a local torch optimizer."""

    def __init__(self, args, model):
        self.model = model
        self.local_optimizer = torch_optimizer(args, model.parameters())
        # --pull=auto leaves the pull to DistributedOptimizer: exact beside
        # a sparsifier, dense beside none.
        keys = COMPRESSION_FLAGS + (PULL_FLAGS if args.pull != "auto" else ())
        self.optimizer = gradwire.torch.DistributedOptimizer(
            self.local_optimizer, model,
            compression={key: getattr(args, key) for key in keys},
            exchange=args.exchange,
            # None: on where gradients are exchanged.
            overlap=None if args.overlap else False,
            shards=[s for s in args.shards.split(",") if s],
            **sync_keywords(args))
        self.forward = model
        # DistributedOptimizer does not say where a restarted worker
        # resumes, so this count starts at 0.
        self.next_step = 0

    def set_epoch(self, epoch):
        self.optimizer.set_epoch(epoch)

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self, epoch):
        self.optimizer.step()
        self.next_step += 1

    def settle(self):
        pass

    def stats(self):
        return self.optimizer.stats.as_dict()

    def describe(self):
        return (f"torch {type(self.local_optimizer).__name__} on every "
                "worker over the gradients the shards sum "
                "(gradwire.torch.DistributedOptimizer)")

    def close(self):
        self.optimizer.close()


class DdpBaseline:
    """Plain PyTorch: DistributedDataParallel over gloo, torch.optim.SGD.
    Bytes are not measured: each step counts the dense fp32 gradient, the
    payload an all-reduce exchanges (a ring all-reduce sends 2 (W-1) / W
    of it per worker and receives as much)."""

    def __init__(self, args, model):
        import datetime
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        self.dist = dist
        dist.init_process_group(
            "gloo", init_method=f"tcp://{args.ddp_master}",
            rank=args.worker_id, world_size=args.num_workers,
            timeout=datetime.timedelta(seconds=args.pull_timeout_seconds))
        self.model = model
        self.forward = DistributedDataParallel(model)
        self.optimizer = torch_optimizer(args, model.parameters())
        self.gradient_bytes = 4 * sum(p.numel() for p in model.parameters()
                                      if p.requires_grad)
        self.next_step = 0

    def set_epoch(self, epoch):
        pass

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self, epoch):
        self.optimizer.step()
        self.next_step += 1

    def settle(self):
        pass

    def stats(self):
        dense = self.gradient_bytes * self.next_step
        return {"steps": self.next_step, "pushed_bytes": dense,
                "pulled_bytes": dense, "dense_equivalent_bytes": dense,
                "init_bytes": 0, "retries": 0, "max_step_lead": 0}

    def describe(self):
        return (f"torch {type(self.optimizer).__name__} in every process "
                "(DDP)")

    def close(self):
        self.dist.destroy_process_group()
