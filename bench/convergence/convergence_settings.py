"""The rows and optimizers of the convergence benchmark
(bench/convergence/convergence.py): each row's worker flags, and the
worker flags of each optimizer on each model."""

import collections

# The benchmark's name in its messages.
PROG = "convergence.py"

Setting = collections.namedtuple("Setting", "name title flags")

# The rows, in table order. The compressed rows keep error feedback (the
# worker's default, named here so that a change of default does not change
# the rows).
SETTINGS = [
    Setting("dense", "dense fp32", ["--compressor=none", "--value-type=fp32"]),
    Setting("fp16", "dense fp16", ["--compressor=fp16"]),
    Setting("topk1", "Top-K 1% + EF",
            ["--compressor=topk", "--ratio=0.01", "--error-feedback"]),
    Setting("dgc01", "Top-K 0.1% DGC + EF",
            ["--compressor=dgc", "--ratio=0.001", "--error-feedback"]),
    Setting("qsgd", "QSGD 256 levels + EF",
            ["--compressor=qsgd", "--levels=256", "--error-feedback"]),
    Setting("onebit", "1-bit sign + EF",
            ["--compressor=onebit", "--error-feedback"]),
]
BASELINE = "dense"

# The optimizers, in table order: the worker's default (no flags) and plain
# SGD. The MLP's SGD runs at momentum's long-run step, lr / (1 - momentum) =
# 0.05 / 0.1; on the CNN that step diverges even dense (docs/convergence.md),
# and 0.1 trains.
# Adam (only when asked for: --optimizers=adam) runs at its usual lr,
# placed by --momentum-placement=auto (1-bit Adam beside compressed pushes).
SGD_LR = {"mlp": 0.5, "cnn": 0.1}
ADAM_LR = 0.001
OPTIMIZERS = ("momentum", "sgd", "adam")
DEFAULT_OPTIMIZERS = ["momentum", "sgd"]


def optimizer_flags(optimizer, model):
    """The worker flags of OPTIMIZER on MODEL."""
    if optimizer == "momentum":
        return []
    if optimizer == "adam":
        return ["--optimizer=adam", f"--lr={ADAM_LR:g}"]
    return ["--optimizer=sgd", f"--lr={SGD_LR[model]:g}"]


def optimizers_text(model):
    """How the table's header names the optimizers on MODEL."""
    return ("momentum: the worker's default (momentum 0.9, lr 0.05, "
            "--momentum-placement=auto); sgd: "
            + " ".join(optimizer_flags("sgd", model)) + "; adam: "
            + " ".join(optimizer_flags("adam", model)))
