"""The worker's flags: gradwire-worker's names, defaults and spelling.

Like Abseil flags, a flag may be written --flag=value, --flag value or
-flag=value, with hyphens or underscores; a boolean as --flag,
--flag=true|false|1|0|yes|no or --noflag. Every flag can also come from
the environment as GRADWIRE_<NAME> (GRADWIRE_WORKER_ID for --worker-id);
the command line wins. Bad flags end the process with argparse's usage
error (exit code 2).
"""

import argparse
import os

import gradwire

# torch.optim optimizers that the shards do not implement.
LOCAL_ONLY_OPTIMIZERS = ("adadelta",)


def parse_bool(text):
    value = str(text).strip().lower()
    if value in ("true", "t", "yes", "y", "1"):
        return True
    if value in ("false", "f", "no", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"'{text}' is not true or false")


parse_bool.metavar = "BOOL"


def choice(*names):
    def parse(text):
        if text not in names:
            raise argparse.ArgumentTypeError(
                f"'{text}' is not one of {', '.join(names)}")
        return text
    parse.metavar = "|".join(names)
    return parse


def at_least(minimum):
    def parse(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be >= {minimum}")
        return value
    parse.metavar = "N"
    return parse


def setting_type(setting):
    """The argparse type of one of gradwire.settings()."""
    if setting["type"] == "bool":
        return parse_bool
    if setting["type"] == "int":
        return int if setting["min"] is None else at_least(setting["min"])
    if setting["type"] == "float":
        return float
    if setting["choices"]:
        return choice(*setting["choices"])
    return str  # str, and list[str] written "a,b"


def setting_flags(*groups):
    """(name, type, default, help) of gradwire's settings in `groups`, as
    the table of settings declares them (gradwire.settings(),
    docs/reference/settings.md): the flags this script shares with
    gradwire-worker, with OVERRIDES applied."""
    flags = []
    for setting in gradwire.settings():
        if not setting["keyword"] or setting["group"] not in groups:
            continue
        default = setting["default"]
        if setting["type"] == "list[str]":
            default = ",".join(default)
        flag = (setting["name"].replace("_", "-"), setting_type(setting),
                default, setting["help"])
        flags.append(OVERRIDES.get(setting["name"], lambda f: f)(flag))
    return flags


# Settings that mean more here than on the shards: --optimizer also names
# torch.optim optimizers this process runs (--api=optimizer, ddp).
OVERRIDES = {
    "optimizer": lambda flag: (
        flag[0], choice("sgd", "momentum", "nesterov", "adam", "adamw",
                        "adadelta"), flag[2],
        "Optimizer: sgd, momentum, nesterov, adam, adamw, adadelta. Run by "
        "the shards with --api=sync (not adadelta); by a local torch.optim "
        "optimizer with --api=optimizer and --baseline=ddp."),
    "pull": lambda flag: (
        flag[0], flag[1], flag[2],
        flag[3] + " DistributedOptimizer: auto is exact beside a "
        "sparsifier."),
}

# (name, type, default, help): gradwire's settings from its table, and
# this script's own flags.
FLAG_GROUPS = {
    "topology": setting_flags("topology"),
    "training": [
        ("data-dir", str, gradwire.datasets.FASHION_MNIST_DIR,
         "Directory holding the Fashion-MNIST .gz IDX files."),
        ("model", choice("cnn", "mlp", "resnet18"), "cnn",
         "Model: cnn and mlp as gradwire-worker's; resnet18 is "
         "torchvision's, with a 3x3 stride-1 first convolution on 1 channel "
         "and no max-pool, for 28x28 images."),
        ("epochs", at_least(0), 1, "Epochs to train."),
        ("batch-size", at_least(1), 64, "Examples per step on each worker."),
        ("max-steps", at_least(0), 0,
         "Stop after this many steps (0: no limit)."),
        ("train-limit", at_least(0), 0,
         "Use only the first N training examples (0: all)."),
        ("test-limit", at_least(0), 0,
         "Use only the first N test examples (0: all)."),
        ("seed", int, 1, "Seed of model initialisation and batch order."),
        ("evaluate", parse_bool, True,
         "Measure test accuracy after every epoch (gradwire local "
         "evaluates on worker 0 only)."),
        ("progress", choice("auto", "bar", "log", "none"), "auto",
         "Progress display: auto (bar on a terminal, lines otherwise), bar, "
         "log or none."),
        ("step-delay-ms", at_least(0), 0,
         "Fault injection: sleep this long before each step's exchange "
         "(a straggler; 0: off)."),
        ("step-delay-every", at_least(1), 1,
         "With --step-delay-ms: sleep only before every N-th step."),
        ("summary-json", str, "", "Write the run's summary to this file."),
        ("dry-run", parse_bool, False,
         "Check the flags, print what they resolve to and exit (the "
         "gradwire options are checked when connecting)."),
    ],
    "compression": setting_flags("compression"),
    "shards": setting_flags("pulls", "optimizer", "consistency", "chunks",
                            "deadlines", "security"),
    "python": [
        ("api", choice("sync", "optimizer"), "sync",
         "sync: gradwire.ParameterSync (the shards run the optimizer); "
         "optimizer: gradwire.torch.DistributedOptimizer (the shards "
         "average, a local torch optimizer steps)."),
        ("overlap", parse_bool, True,
         "Push each gradient from a backward hook as soon as it is ready, "
         "hiding the push behind the rest of backward() (not with "
         "--exchange=updates)."),
        ("exchange", choice("auto", "gradients", "updates"), "auto",
         "--api=optimizer: exchange the gradients (the local optimizer "
         "steps on their mean), each worker's optimizer update, or auto "
         "(updates for adaptive optimizers; DistributedOptimizer's "
         "exchange)."),
        ("pull-ahead", parse_bool, True,
         "--api=sync with --overlap: pull each parameter's weights as soon "
         "as its gradient is pushed; step() returns at once and each layer "
         "of the next forward pass waits for its own weights "
         "(ParameterSync.pull_ahead)."),
        ("baseline", choice("none", "ddp"), "none",
         "ddp: train with torch DistributedDataParallel (gloo, dense fp32 "
         "all-reduce) instead of gradwire; --shards is ignored. Its byte "
         "counts are computed, not measured: the dense fp32 gradient per "
         "step."),
        ("ddp-master", str, "127.0.0.1:29511",
         "--baseline=ddp: host:port of the TCP rendezvous (rank 0 listens)."),
        ("tune-heap", parse_bool, True,
         "Keep each step's large buffers in the heap (gradwire.tuning.tune_heap, "
         "as gradwire-worker does), for gradwire and --baseline=ddp alike."),
        ("threads", at_least(0), 0,
         "torch.set_num_threads (0: torch's default, which follows "
         "OMP_NUM_THREADS; gradwire local sets it to cores / workers)."),
    ],
    # Flags gradwire local or a TLS setup hands every worker, which only
    # gradwire-worker uses: this script serves no /metrics (writing no
    # port file is allowed) and the server-side TLS flag means nothing here.
    "ignored": [
        ("metrics-address", str, "0.0.0.0",
         "Ignored (gradwire-worker's /metrics)."),
        ("metrics-port", int, 0, "Ignored (gradwire-worker's /metrics)."),
        ("metrics-port-file", str, "",
         "Ignored (gradwire-worker's /metrics)."),
        ("metrics-linger-seconds", float, 0.0,
         "Ignored (gradwire-worker's /metrics)."),
        ("tls-require-client-cert", parse_bool, False,
         "Ignored (a shard's flag)."),
    ],
}

GROUP_TITLES = {
    "topology": "topology (gradwire-worker flags)",
    "training": "training (gradwire-worker flags)",
    "compression": "gradient compression (gradwire-worker flags)",
    "shards":
        "shards, optimizer, deadlines and security (gradwire-worker flags)",
    "python": "this script only",
    "ignored": "accepted for gradwire local and ignored (no /metrics here)",
}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="worker.py", allow_abbrev=False,
        usage="%(prog)s [--flag=value ...]",
        description="Trains Fashion-MNIST as one worker of a gradwire job. "
        "Flags as gradwire-worker's: --flag=value or --flag value; booleans "
        "--flag, --flag=false or --noflag; GRADWIRE_<NAME> in the "
        "environment sets a default.")
    for group_name, flags in FLAG_GROUPS.items():
        group = parser.add_argument_group(GROUP_TITLES[group_name])
        for name, kind, default, text in flags:
            metavar = getattr(kind, "metavar", None) or \
                {int: "N", float: "X", str: "TEXT"}[kind]
            shown = str(default).lower() if isinstance(default, bool) \
                else repr(default)
            group.add_argument(f"--{name}", type=kind, default=default,
                               metavar=metavar,
                               help=f"{text} (default: {shown})")
    return parser


def normalize_argv(argv, bool_flags, value_flags):
    """Rewrites Abseil spellings into --name=value, which argparse takes."""
    out = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "-help", "--help", "--helpfull", "--helpshort"):
            out.append("--help")
            continue
        if arg == "--" or not arg.startswith("-") or len(arg) < 2:
            out.append(arg)  # argparse rejects stray arguments
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        name = name.replace("_", "-")
        if name.startswith("no") and name[2:] in bool_flags and not has_value:
            out.append(f"--{name[2:]}=false")
        elif name in bool_flags:
            out.append(f"--{name}={value if has_value else 'true'}")
        elif name in value_flags and not has_value and i < len(argv):
            out.append(f"--{name}={argv[i]}")  # --flag value
            i += 1
        else:
            out.append(f"--{name}{'=' if has_value else ''}{value}")
    return out


def parse_flags(argv):
    parser = build_parser()
    bool_flags, value_flags = set(), set()
    for flags in FLAG_GROUPS.values():
        for name, kind, _, _ in flags:
            (bool_flags if kind is parse_bool else value_flags).add(name)
            variable = "GRADWIRE_" + name.replace("-", "_").upper()
            if variable in os.environ:
                try:
                    parser.set_defaults(
                        **{name.replace("-", "_"): kind(os.environ[variable])})
                except (ValueError, argparse.ArgumentTypeError) as error:
                    parser.error(f"{variable}: {error}")
    args = parser.parse_args(normalize_argv(argv, bool_flags, value_flags))
    check_flags(parser, args)
    return args


def check_flags(parser, args):
    if args.worker_id >= args.num_workers:
        parser.error(f"--worker-id: {args.worker_id} must be below "
                     f"--num-workers={args.num_workers}")
    if args.local_rank >= args.local_size:
        parser.error(f"--local-rank: {args.local_rank} must be below "
                     f"--local-size={args.local_size}")
    if args.baseline == "ddp":
        if args.local_size != 1:
            parser.error("--baseline=ddp: use --local-size=1 (one rank per "
                         "worker id)")
        host, _, port = args.ddp_master.rpartition(":")
        if not host or not port.isdigit():
            parser.error(f"--ddp-master: '{args.ddp_master}' is not host:port")
    elif not [s for s in args.shards.split(",") if s]:
        parser.error("--shards: no shard address")
    if args.optimizer in LOCAL_ONLY_OPTIMIZERS and args.baseline != "ddp" \
            and args.api == "sync":
        parser.error(f"--optimizer={args.optimizer} runs only in this "
                     "process (--api=optimizer or --baseline=ddp); with "
                     "--api=sync the shards run the optimizer and know sgd, "
                     "momentum, nesterov, adam and adamw")
