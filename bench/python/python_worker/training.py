"""The training loop, the run's summary, and one whole run of a worker."""

import json
import os
import time

import torch
import torch.nn.functional as F

from .data import TrainingData, epoch_batches
from .exchange import DdpBaseline, GradwireOptimizer, GradwireSync
from .models import accuracy, make_model, weights_fingerprint
from .progress import Progress, human_bytes


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
