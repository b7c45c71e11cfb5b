#!/usr/bin/python3
"""Fashion-MNIST data-parallel training with gradwire, in Python: the
benchmarks' and tests' Python worker.

Every worker process trains its own part of Fashion-MNIST and exchanges
Top-K-compressed gradients with gradwire's parameter-server shards. It is
a drop-in worker for `gradwire local` and takes gradwire-worker's flags,
spelled the same way, so that its runs can be compared with
gradwire-worker's bit for bit. A short example to read and copy is
examples/python/train.py.

    # a whole job on this machine: 2 shards, 2 Python workers
    PYTHONPATH=build/python build/bin/gradwire local --shards=2 --workers=2 \\
        --worker-command="/usr/bin/python3 bench/python/worker.py" \\
        --model=cnn --compressor=topk --ratio=0.01 --error-feedback

    # by hand, against shards that already run
    PYTHONPATH=build/python /usr/bin/python3 bench/python/worker.py \\
        --shards=127.0.0.1:7000 --worker-id=0 --num-workers=2 --model=resnet18

    # the same training with plain PyTorch DDP (gloo), for comparison
    /usr/bin/python3 bench/python/worker.py --baseline=ddp \\
        --worker-id=0 --num-workers=2 --ddp-master=127.0.0.1:29511 ...

Three ways to exchange gradients (--api, --baseline):
  --api=sync       gradwire.ParameterSync: the shards run the optimizer
                   (--optimizer, --lr, --momentum) and send the new weights
                   back; sync.step() replaces optimizer.step().
  --api=optimizer  gradwire.torch.DistributedOptimizer: the shards only
                   average the compressed gradients; a local torch.optim
                   optimizer (chosen by --optimizer) steps on the average.
  --baseline=ddp   torch.nn.parallel.DistributedDataParallel over gloo, no
                   gradwire at all: dense fp32 all-reduce.

The data split, the batch order and the model's initial weights follow
gradwire-worker (apps/fashion_mnist/trainer.cc) exactly: worker w of W trains on the
examples i with i % W == w, each epoch visits them in a permutation that
depends only on (--seed + w, epoch), and torch.manual_seed(--seed) is set
before the model is built. Every worker takes the same number of steps.

Exit codes: 0 done, 1 a gradwire, shard or training error (printed),
2 a bad flag.
"""

import argparse
import json
import os
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import gradwire
    import gradwire.torch
except ImportError as error:
    sys.exit(f"worker.py: cannot import gradwire ({error}); build it "
             "(make build) and set PYTHONPATH=build/python")

USAGE_EXIT = 2

# ---------------------------------------------------------------------------
# Flags: gradwire-worker's names, defaults and spelling.
#
# Like Abseil flags, a flag may be written --flag=value, --flag value or
# -flag=value, with hyphens or underscores; a boolean as --flag,
# --flag=true|false|1|0|yes|no or --noflag. Every flag can also come from
# the environment as GRADWIRE_<NAME> (GRADWIRE_WORKER_ID for --worker-id);
# the command line wins.
# ---------------------------------------------------------------------------


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
         "Keep each step's large buffers in the heap (gradwire.tune_heap, "
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


# ---------------------------------------------------------------------------
# Data: this worker's part of Fashion-MNIST, in gradwire-worker's order.
# ---------------------------------------------------------------------------

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class Mt19937_64:
    """std::mt19937_64, so that batch orders equal gradwire-worker's."""

    def __init__(self, seed):
        self._state = [seed & MASK64]
        for i in range(1, 312):
            previous = self._state[-1]
            self._state.append(
                (6364136223846793005 * (previous ^ (previous >> 62)) + i)
                & MASK64)
        self._index = 312

    def _twist(self):
        state = self._state
        for i in range(312):
            x = (state[i] & 0xFFFFFFFF80000000) | (
                state[(i + 1) % 312] & 0x7FFFFFFF)
            x_a = x >> 1
            if x & 1:
                x_a ^= 0xB5026F5AA96619E9
            state[i] = state[(i + 156) % 312] ^ x_a
        self._index = 0

    def __call__(self):
        if self._index >= 312:
            self._twist()
        x = self._state[self._index]
        self._index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & MASK64


def uniform_below(rng, bound):
    """Uniform in [0, bound) by rejection, as gradwire-worker draws it."""
    reject_from = MASK64 - (MASK64 % bound + 1) % bound
    while True:
        x = rng()
        if x <= reject_from:
            return x % bound


def epoch_batches(num_examples, batch_size, seed, epoch):
    """The epoch's full batches (index tensors): BatchOrder::Batches of
    apps/fashion_mnist/fashion_mnist.cc with drop_last, a Fisher-Yates shuffle seeded
    from (seed, epoch) only. A script of your own can use
    torch.utils.data.DistributedSampler instead; this one follows
    gradwire-worker so that the two can be compared bit for bit."""
    rng = Mt19937_64(splitmix64(splitmix64(seed & MASK64) ^ epoch))
    order = list(range(num_examples))
    for i in range(num_examples - 1, 0, -1):
        j = uniform_below(rng, i + 1)
        order[i], order[j] = order[j], order[i]
    order = torch.tensor(order, dtype=torch.int64)
    return list(order[:num_examples // batch_size * batch_size]
                .split(batch_size))


class TrainingData:
    """This process's part of the training set (every parts-th example,
    from its own offset), the whole test set, and the steps per epoch that
    every worker takes: the smallest part's full batches."""

    def __init__(self, args):
        images, labels = gradwire.load_fashion_mnist(
            args.data_dir, True, args.train_limit or -1)
        self.test_images, self.test_labels = gradwire.load_fashion_mnist(
            args.data_dir, False, args.test_limit or -1)
        self.part = args.worker_id * args.local_size + args.local_rank
        parts = args.num_workers * args.local_size
        self.images = images[self.part::parts].contiguous()
        self.labels = labels[self.part::parts].contiguous()
        self.steps_per_epoch = (len(labels) // parts) // args.batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"{len(labels)} training examples over {parts} processes do "
                f"not fill one batch of {args.batch_size}")


# ---------------------------------------------------------------------------
# Models. cnn and mlp have gradwire-worker's layers, parameter names and
# order (apps/fashion_mnist/models.h), so C++ and Python workers build equal weights
# from equal seeds.
# ---------------------------------------------------------------------------


class MlpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class CnnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def resnet18():
    import torchvision  # only this model needs it
    net = torchvision.models.resnet18(num_classes=10)
    # 28x28 inputs: keep the resolution (3x3 stride 1, no max-pool).
    net.conv1 = nn.Conv2d(1, 64, kernel_size=3, stride=1, padding=1,
                          bias=False)
    nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out",
                            nonlinearity="relu")
    net.maxpool = nn.Identity()
    return net


def make_model(name):
    return {"mlp": MlpNet, "cnn": CnnNet, "resnet18": resnet18}[name]()


def count_correct(model, images, labels, start, end, batch=100):
    correct = 0
    with torch.no_grad():
        for first in range(start, end, batch):
            last = min(first + batch, end)
            logits = model(images[first:last])
            correct += int((logits.argmax(1) == labels[first:last]).sum())
    return correct


def accuracy(model, images, labels, batch=100):
    """Fraction classified correctly, without autograd, on every core this
    process may use: one thread per core, each on its own slice with one
    intra-op thread (slices scale with the cores where torch's intra-op
    threads do not), as gradwire-worker's Accuracy (apps/fashion_mnist/trainer.cc)
    slices and batches. Training waits for the evaluation, so the cores the
    other workers trained on are free."""
    size = len(labels)
    if size == 0:
        return 0.0
    threads = max(1, min(len(os.sched_getaffinity(0)),
                         (size + batch - 1) // batch))
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    model.eval()
    correct = [0] * threads
    errors = []

    def run(t):
        try:
            correct[t] = count_correct(model, images, labels,
                                       size * t // threads,
                                       size * (t + 1) // threads, batch)
        except Exception as error:  # noqa: BLE001 - raised below
            errors.append(error)
    try:
        workers = [threading.Thread(target=run, args=(t,))
                   for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        model.train()
        torch.set_num_threads(saved)
    if errors:
        raise errors[0]
    return sum(correct) / size


def weights_fingerprint(named_parameters):
    """64-bit FNV-1a over names, shapes (int64) and float32 bytes, as 16 hex
    digits: WeightsFingerprint of apps/fashion_mnist/trainer.cc. Equal fingerprints
    mean bit-identical weights."""
    hash_value = 0xCBF29CE484222325

    def mix(data):
        nonlocal hash_value
        for byte in data:
            hash_value = ((hash_value ^ byte) * 0x100000001B3) & MASK64

    for name, tensor in named_parameters:
        values = tensor.detach().to("cpu", torch.float32).contiguous()
        mix(name.encode())
        for size in values.shape:
            mix(int(size).to_bytes(8, sys.byteorder, signed=True))
        mix(values.numpy().tobytes())
    return f"{hash_value:016x}"


# ---------------------------------------------------------------------------
# The three ways to exchange gradients. Each holds the plain model
# (.model) and what computes the loss (.forward: the model, or DDP's
# wrapper), and offers zero_grad(), set_epoch(e), step(epoch), next_step
# (steps done, resumed ones included), stats() and close().
# ---------------------------------------------------------------------------

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


# torch.optim optimizers that the shards do not implement.
LOCAL_ONLY_OPTIMIZERS = ("adadelta",)


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
        options = {key: getattr(args, key) for key in
                   COMPRESSION_FLAGS + PULL_FLAGS + OPTIMIZER_FLAGS + SYNC_FLAGS}
        self.model = model
        self.sync = gradwire.ParameterSync(
            shards=[s for s in args.shards.split(",") if s], **options)
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
            **{key: getattr(args, key) for key in SYNC_FLAGS})
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


# ---------------------------------------------------------------------------
# Progress on the terminal: a bar that redraws itself on a terminal, a line
# every 5 s otherwise (as gradwire-worker).
# ---------------------------------------------------------------------------


def human_bytes(count):
    value, unit = float(count), 0
    units = ("B", "kB", "MB", "GB", "TB")
    while value >= 1000.0 and unit < len(units) - 1:
        value /= 1000.0
        unit += 1
    return f"{int(count)} B" if unit == 0 else f"{value:.1f} {units[unit]}"


class Progress:
    def __init__(self, label, mode):
        self.label = label
        self.quiet = mode == "none"
        self.bar = mode == "bar" or (mode == "auto" and sys.stdout.isatty())
        self.interval = 0.1 if self.bar else 5.0
        self.last_draw = float("-inf")
        self.bar_open = False

    def update(self, epoch, epochs, step, steps, loss, samples_per_second,
               pushed, dense):
        now = time.monotonic()
        if self.quiet or (now - self.last_draw < self.interval
                          and step != steps):
            return
        self.last_draw = now
        text = (f"{self.label} epoch {epoch + 1}/{epochs} step {step}/{steps} "
                f"loss {loss:.4f} {samples_per_second:.0f} samples/s sent "
                f"{human_bytes(pushed)} of {human_bytes(dense)} dense "
                f"({dense / pushed if pushed else 0:.0f}x less)")
        if self.bar:
            filled = 24 * step // steps if steps else 0
            print(f"\r\033[K[{'#' * filled}{'.' * (24 - filled)}] {text}",
                  end="", flush=True)
            self.bar_open = True
        else:
            print(text, flush=True)

    def line(self, text):
        if self.quiet:
            return
        if self.bar_open:
            print()
            self.bar_open = False
        print(f"{self.label} {text}", flush=True)


# ---------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------


def train(args, data, exchange, progress):
    """The training loop of apps/fashion_mnist/trainer.cc. Returns the summary's
    training fields."""
    result = {"resumed_at_step": exchange.next_step, "final_loss": 0.0,
              "epoch_loss": [], "epoch_test_accuracy": []}
    if exchange.next_step > 0:
        progress.line(f"resuming at step {exchange.next_step}")
    total_steps = data.steps_per_epoch * args.epochs
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)
    model = exchange.model
    start = window_start = time.monotonic()
    window_samples = 0
    train_seconds = 0.0
    eval_seconds = 0.0
    for epoch in range(args.epochs):
        if exchange.next_step >= total_steps:
            break
        exchange.set_epoch(epoch)
        batches = epoch_batches(len(data.labels), args.batch_size,
                                args.seed + data.part, epoch)
        first = epoch * data.steps_per_epoch
        epoch_start = time.monotonic()
        epoch_losses = []
        for b in range(data.steps_per_epoch):
            if exchange.next_step >= total_steps:
                break
            if first + b < exchange.next_step:
                continue  # resumed past this batch
            index = batches[b]
            exchange.zero_grad()
            loss = F.cross_entropy(
                exchange.forward(data.images.index_select(0, index)),
                data.labels.index_select(0, index))
            loss.backward()
            if args.step_delay_ms and \
                    exchange.next_step % args.step_delay_every == 0:
                time.sleep(args.step_delay_ms / 1000)
            exchange.step(epoch)
            result["final_loss"] = loss.item()
            epoch_losses.append(result["final_loss"])
            window_samples += len(index)
            seconds = time.monotonic() - window_start
            stats = exchange.stats()
            progress.update(epoch, args.epochs, b + 1, data.steps_per_epoch,
                            result["final_loss"],
                            window_samples / seconds if seconds > 0 else 0,
                            stats["pushed_bytes"],
                            stats["dense_equivalent_bytes"])
            if seconds > 10:
                window_start, window_samples = time.monotonic(), 0
        exchange.settle()
        train_seconds += time.monotonic() - epoch_start
        if epoch_losses:
            result["epoch_loss"].append(sum(epoch_losses) / len(epoch_losses))
        if args.evaluate:
            eval_start = time.monotonic()
            result["test_accuracy"] = accuracy(model, data.test_images,
                                               data.test_labels)
            eval_seconds += time.monotonic() - eval_start
            result["epoch_test_accuracy"].append(result["test_accuracy"])
            progress.line(f"epoch {epoch + 1} test accuracy "
                          f"{result['test_accuracy']:.4f}")
    if args.evaluate and "test_accuracy" not in result:
        eval_start = time.monotonic()
        result["test_accuracy"] = accuracy(model, data.test_images,
                                           data.test_labels)
        eval_seconds += time.monotonic() - eval_start
    result["steps"] = exchange.next_step
    result["wall_seconds"] = time.monotonic() - start
    result["train_seconds"] = train_seconds
    result["eval_seconds"] = eval_seconds
    # After the clock stops: hashing in Python takes about 1 s per 6 MB.
    result["weights_fingerprint"] = weights_fingerprint(
        model.named_parameters())
    return result


def summary(args, result, stats):
    """gradwire-worker's --summary-json keys (apps/fashion_mnist/trainer.cc
    SummaryJson), which gradwire local adds up, plus this script's own."""
    ddp = args.baseline == "ddp"
    out = {}
    if "test_accuracy" in result:
        out["test_accuracy"] = round(result["test_accuracy"], 6)
    out.update({
        "steps": result["steps"],
        "resumed_at_step": result["resumed_at_step"],
        "steps_run": stats["steps"],
        "max_step_lead": stats["max_step_lead"],
        "wall_seconds": round(result["wall_seconds"], 3),
        "pushed_bytes": stats["pushed_bytes"],
        "pulled_bytes": stats["pulled_bytes"],
        "dense_equivalent_bytes": stats["dense_equivalent_bytes"],
        "init_bytes": stats["init_bytes"],
        "retries": stats["retries"],
        "final_loss": round(result["final_loss"], 6),
        "worker_id": args.worker_id,
        "num_workers": args.num_workers,
        "compressor": "none" if ddp else args.compressor,
        "ratio": 1.0 if ddp else args.ratio,
        "evaluated": "test_accuracy" in result,
        "min_kept": args.min_kept,
        "compress_threads": (args.compress_threads
                             or len(os.sched_getaffinity(0))),
        "error_feedback": False if ddp else args.error_feedback,
        "value_type": "fp32" if ddp else args.value_type,
        "mode": "bsp" if ddp else args.mode,
        "optimizer": result["optimizer"],
    })
    out["epoch_loss"] = [round(x, 6) for x in result["epoch_loss"]]
    if "test_accuracy" in result:
        out["epoch_test_accuracy"] = [
            round(x, 6) for x in result["epoch_test_accuracy"]]
    for phase in ("compress", "push", "pull", "pull_wait", "reduce"):
        out[f"{phase}_seconds"] = round(stats.get(f"{phase}_seconds", 0.0), 3)
    out.update({
        "weights_fingerprint": result["weights_fingerprint"],
        "worker": "python",
        "model": args.model,
        "api": "ddp" if ddp else args.api,
        "overlap": args.overlap and not ddp,
        "train_seconds": round(result["train_seconds"], 3),
        "eval_seconds": round(result["eval_seconds"], 3),
    })
    if ddp:
        out["byte_counts"] = ("computed, not measured: the dense fp32 "
                              "gradient per step, what DDP all-reduces")
    return out


def run(args):
    label = f"worker {args.worker_id}"
    if args.local_size > 1:
        label += f".{args.local_rank}"
    progress = Progress(label, "none" if args.local_rank else args.progress)
    data = TrainingData(args)
    torch.manual_seed(args.seed)  # equal initial weights on every worker
    model = make_model(args.model)
    if args.baseline == "ddp":
        exchange = DdpBaseline(args, model)
    elif args.api == "optimizer":
        exchange = GradwireOptimizer(args, model)
    else:
        exchange = GradwireSync(args, model)
    try:
        result = train(args, data, exchange, progress)
        result["optimizer"] = exchange.describe()
        stats = exchange.stats()
    finally:
        exchange.close()
    out = summary(args, result, stats)
    if not progress.quiet:
        evaluated = (f"test accuracy {out['test_accuracy']:.4f}"
                     if "test_accuracy" in out else "not evaluated")
        pushed, dense = out["pushed_bytes"], out["dense_equivalent_bytes"]
        print(f"{label} done: {out['steps']} steps in "
              f"{out['wall_seconds']:.1f} s, {evaluated}, pushed "
              f"{human_bytes(pushed)} (dense fp32 would be "
              f"{human_bytes(dense)}, {dense / pushed if pushed else 0:.1f}x "
              f"less), pulled {human_bytes(out['pulled_bytes'])}"
              + (" [DDP: bytes computed, not measured]"
                 if args.baseline == "ddp" else ""), flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            f.write(json.dumps(out) + "\n")


def main(argv):
    args = parse_flags(argv)
    if args.dry_run:
        for key, value in sorted(vars(args).items()):
            if isinstance(value, bool):
                value = str(value).lower()
            print(f"--{key.replace('_', '-')}={value}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tune_heap:
        _, description = gradwire.tune_heap()
        print(f"worker {args.worker_id}: {description}", file=sys.stderr)
    if args.local_size > 1:
        args.overlap = False  # ParameterSync's hooks need local_size 1
    try:
        run(args)
    except ValueError as error:  # a gradwire option the C++ side refused
        print(f"worker {args.worker_id}: {error}", file=sys.stderr)
        return USAGE_EXIT
    except (gradwire.Error, RuntimeError, OSError) as error:
        print(f"worker {args.worker_id}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
