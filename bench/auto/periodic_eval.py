#!/usr/bin/python3
"""A real model's training script run unchanged, with what the link matrix
(bench/auto/auto.sh --model=resnet18|gpt) measures added around its steps:

  periodic_eval.py [--every=N] [--link=IFACE] [--mark=S] SCRIPT [FLAGS]

SCRIPT runs as __main__ with FLAGS as its command line:
examples/python/MODEL/original.py (DDP), train.py (gradwire, under
`gradwire run`), or bench/models/ddp_hooked.py with its own arguments
(DDP with one of PyTorch's communication hooks).

  --every=N     every N steps (0: never; the last step excepted, where the
                script evaluates itself) each rank runs the script's own
                evaluation on the model: ResNet-18's evaluate() on the
                test set of its --test-limit, the GPT's perplexity() on its
                held-out windows. Rank 0's value is recorded. Every rank
                pauses for it at the same step, so that no rank's steps
                absorb another's evaluation (DDP ranks meet in a barrier
                after it), and the pause is taken off the training clock.
                The random state is saved and restored around it: the
                training is the same with and without evaluations.
  --link=IFACE  reads IFACE's byte counters (/proc/net/dev of this
                process's network namespace) when start-up has ended (the
                scheduler is built: after DDP's broadcast of the weights,
                or gradwire's Init and first pull) and after the last
                step; under DDP after a barrier each time (ddp_link.py
                says why).
  --mark=S      also reads them after step S: PowerSGD's dense warm-up
                steps (ddp_hooked.py's start, 2 by default).

The steps are the script's LR scheduler steps (both scripts step one
LambdaLR once per optimizer step); the model is the module whose
parameters are the scheduler's optimizer's (not the DDP wrapper).

The script's summary (its --summary=PATH, "{rank}" replaced) gets:
  evaluations     [{step, seconds, metric}, ...]: seconds of training
                  (evaluations left out) when the step ended; rank 0 adds
                  the script's own value at the start (GPT) and the end
  metric, higher_is_better   test_accuracy (ResNet-18) or
                  test_perplexity (GPT), and which way is better
  eval_seconds    what the evaluations, barriers and reads took inside
                  the training loop
  train_seconds   the script's seconds_per_step x steps less eval_seconds
  startup_seconds from AUTO_LAUNCHED_AT (auto.sh's launch of the row's
                  processes, Unix seconds; else this process's start) to
                  the first step
  link_interface, link_sent_bytes, link_received_bytes  the steps' bytes
  warmup_steps, link_after_warmup_{sent,received}_bytes  with --mark
Exit code: the script's (2 for a bad command line here).
"""

import gc
import json
import os
import runpy
import sys
import time

STARTED = float(os.environ.get("AUTO_LAUNCHED_AT") or time.time())
PROG = "periodic_eval.py"

import torch  # noqa: E402  (after the clock: importing it is start-up)
import torch.distributed as dist  # noqa: E402

from link_bytes import InterfaceCounters  # noqa: E402  (beside this file)


def main_module():
    """The running script's globals (runpy's __main__, innermost)."""
    return sys.modules["__main__"]


def find_model(optimizer):
    """The outermost non-DDP module whose parameters are the optimizer's."""
    wanted = {id(p) for group in optimizer.param_groups
              for p in group["params"]}
    # The class itself: ddp_hooked.py replaces torch.nn.parallel's name.
    ddp = torch.nn.parallel.distributed.DistributedDataParallel
    found = [m for m in gc.get_objects()
             if isinstance(m, torch.nn.Module) and not isinstance(m, ddp)
             and {id(p) for p in m.parameters()} == wanted]
    return max(found, key=lambda m: len(list(m.modules())), default=None)


class Evaluation:
    """The script's own evaluation, as its main() calls it at the end."""

    def __init__(self, script, args):
        self.script, self.args, self.data = script, args, None
        self.resnet = hasattr(script, "evaluate")
        if not self.resnet and not hasattr(script, "perplexity"):
            sys.exit(f"{PROG}: the script has neither evaluate() "
                     "(ResNet-18) nor perplexity() (GPT)")
        self.metric = "test_accuracy" if self.resnet else "test_perplexity"

    def __call__(self, model):
        with torch.random.fork_rng(devices=[]):
            if self.resnet:
                if self.data is None:
                    self.data = self.script.fashion_mnist(
                        self.args.data_dir, False, self.args.test_limit)
                return self.script.evaluate(model, self.data)[0]
            if self.data is None:
                self.data = self.script.read_corpus(self.args.corpus_dir)[1]
            return self.script.perplexity(model, self.data, self.args)


class Probe:
    """What runs at the scheduler's construction and after each step."""

    def __init__(self, every, link, mark):
        self.every, self.mark = every, mark
        self.link = InterfaceCounters(link) if link else None
        self.reads = {}  # label: (sent, received)
        self.evaluations = []  # [step, wall time at its end, metric]
        self.overhead = 0.0
        self.scheduler = self.model = self.evaluate = None
        self.steps = self.ended = None

    def synchronized(self):
        if dist.is_available() and dist.is_initialized():
            dist.barrier()

    def read(self, label):
        if self.link is not None:
            self.synchronized()
            self.reads[label] = self.link.read()

    def start(self, scheduler):
        script = main_module()
        args = script.parse_args()
        self.scheduler, self.steps = scheduler, args.steps
        self.evaluate = Evaluation(script, args)
        self.model = find_model(scheduler.optimizer)
        if self.model is None:
            sys.exit(f"{PROG}: no module holds the optimizer's parameters")
        self.read("start")
        self.first_step_at = time.time()

    def after_step(self, step):
        begun = time.time()
        if step == self.steps:
            self.read("end")
        elif self.every and step % self.every == 0:
            # The training clock at this step: the pauses so far left out.
            clock = begun - self.overhead
            self.evaluations.append([step, clock, self.evaluate(self.model)])
            self.synchronized()
        if step == self.mark:
            self.read("mark")
        self.overhead += time.time() - begun
        if step == self.steps:
            self.ended = time.time()

    def bytes_between(self, since, until):
        if since not in self.reads or until not in self.reads:
            return None
        return [b - a for a, b in zip(self.reads[since], self.reads[until])]

    def summary_fields(self, summary):
        """What this probe adds to the script's summary."""
        train = summary["seconds_per_step"] * summary["steps"]
        # The script's clock started this long before the last step ended.
        first = self.ended - train if self.ended else self.first_step_at
        out = {"metric": self.evaluate.metric,
               "higher_is_better": self.evaluate.resnet,
               "eval_seconds": round(self.overhead, 3),
               "train_seconds": round(train - self.overhead, 3),
               "startup_seconds": round(first - STARTED, 3)}
        evaluations = []
        if "start_perplexity" in summary:
            evaluations.append({"step": 0, "seconds": 0.0,
                                "metric": summary["start_perplexity"]})
        for step, clock, metric in self.evaluations:
            evaluations.append({"step": step,
                                "seconds": round(clock - first, 3),
                                "metric": metric})
        if self.evaluate.metric in summary:
            evaluations.append({"step": summary["steps"],
                                "seconds": out["train_seconds"],
                                "metric": summary[self.evaluate.metric]})
        out["evaluations"] = evaluations
        out.update(self.link_fields())
        return out

    def link_fields(self):
        steps = self.bytes_between("start", "end")
        if steps is None:
            return {}
        out = {"link_interface": self.link.name,
               "link_sent_bytes": steps[0], "link_received_bytes": steps[1]}
        after = self.bytes_between("mark", "end")
        if after is not None:
            out.update(warmup_steps=self.mark,
                       link_after_warmup_sent_bytes=after[0],
                       link_after_warmup_received_bytes=after[1])
        return out


def install(probe):
    """Patches LambdaLR so that the first one built reports to `probe`."""
    scheduler_class = torch.optim.lr_scheduler.LambdaLR
    plain_init, plain_step = scheduler_class.__init__, scheduler_class.step

    def init(self, *args, **kwargs):
        plain_init(self, *args, **kwargs)
        if probe.scheduler is None:
            probe.start(self)

    def step(self, *args, **kwargs):
        plain_step(self, *args, **kwargs)
        # _step_count: 1 after the constructor's own step, k + 1 after k.
        if probe.scheduler is self and self._step_count > 1:
            probe.after_step(self._step_count - 1)

    scheduler_class.__init__, scheduler_class.step = init, step


def summary_path(argv):
    """The script's --summary, this rank's; None without one."""
    for i, arg in enumerate(argv):
        if arg.startswith("--summary="):
            path = arg.split("=", 1)[1]
        elif arg == "--summary" and i + 1 < len(argv):
            path = argv[i + 1]
        else:
            continue
        return path.replace("{rank}", os.environ.get("RANK", "0"))
    return None


def parse(argv):
    """({every, link, mark}, script argv) of the command line."""
    options = {"every": 0, "link": "", "mark": 0}
    while argv and argv[0].startswith("--"):
        name, sep, value = argv.pop(0)[2:].partition("=")
        if name not in options or not sep:
            raise ValueError(f"'--{name}{sep}{value}' is not --every=N, "
                             "--link=IFACE or --mark=S")
        options[name] = value if name == "link" else int(value)
    if not argv:
        raise ValueError("SCRIPT is missing")
    return options, argv


def main(argv):
    try:
        options, script = parse(list(argv))
    except ValueError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    probe = Probe(**options)
    install(probe)
    sys.argv = script
    # As `python3 SCRIPT` would: the script's folder first on the path.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script[0])))
    code = 0
    try:
        runpy.run_path(script[0], run_name="__main__")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (
            0 if done.code is None else 1)
    path = summary_path(script[1:])
    if code == 0 and path and probe.evaluate is not None:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
        summary.update(probe.summary_fields(summary))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
