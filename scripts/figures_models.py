"""The figures of bench/models/models.py's JSON: the user's ResNet-18 and
GPT scripts against DDP and PyTorch's PowerSGD hook."""

from figures_common import (MODELS, POWERSGD, figure, listed, mean,
                            median, megabytes, seeds, spread)


# bench/models/models.py's JSON: the user's scripts against DDP.

def model_runs(document, model, *methods):
    """The runs of MODEL by one of METHODS, leaving out a run whose ranks
    ended with different weights (its figure is not a result)."""
    return [r for r in document["runs"] if r["model"] == model
            and r["method"] in methods and r.get("ranks_agree") is not False]


def ddp_bytes(run):
    """A ring all-reduce's bytes per worker per step, both ways: 2 (W-1)/W
    of the fp32 gradient each way (as bench/models/models.py computes
    DDP's)."""
    workers = run["workers"]
    return 2 * 2 * (workers - 1) / workers * 4 * run["parameters"]


def ddp_of(document, run):
    """DDP's run of the same model, workers, seed and steps."""
    for base in model_runs(document, run["model"], "ddp"):
        if all(base[k] == run[k] for k in ("workers", "seed", "steps")):
            return base
    raise KeyError(f"no DDP run for {run['model']} seed {run['seed']}")


@figure("resnet_bytes_ratio", MODELS)
def resnet_bytes_ratio(models):
    runs = model_runs(models, "resnet", "gradwire")
    ratios = [ddp_bytes(r) / r["bytes_per_worker_step"] for r in runs]
    return f"{median(ratios):.0f}×"


@figure("resnet_bytes", MODELS)
def resnet_bytes(models):
    runs = model_runs(models, "resnet", "gradwire")
    sent = [r["bytes_per_worker_step"] for r in runs]
    return (f"{megabytes(median(sent))} a step against DDP's "
            f"{megabytes(ddp_bytes(runs[0]))}, "
            f"{spread(sent, megabytes, 'seeds')}")


@figure("gpt_bytes_ratio", MODELS)
def gpt_bytes_ratio(models):
    runs = model_runs(models, "gpt", "gradwire", "gradwire-repeat")
    ratios = [ddp_bytes(r) / r["bytes_per_worker_step"] for r in runs]
    return (f"{median(ratios):.0f}× ({seeds(runs)}, "
            f"{spread(ratios, lambda v: f'{v:.0f}×')})")


@figure("resnet_gap", MODELS)
def resnet_gap(models):
    runs = model_runs(models, "resnet", "gradwire")
    ddp = model_runs(models, "resnet", "ddp")
    gap = mean(r["metric"] for r in ddp) - mean(r["metric"] for r in runs)
    return f"{100 * gap:.1f} points"


@figure("resnet_accuracy", MODELS)
def resnet_accuracy(models):
    runs = model_runs(models, "resnet", "gradwire")
    ddp = model_runs(models, "resnet", "ddp")
    ours = [100 * r["metric"] for r in runs]
    theirs = [100 * r["metric"] for r in ddp]
    steps = listed(str(s) for s in sorted({r["steps"] for r in runs}))
    return (f"{mean(ours):.2f}% against DDP's {mean(theirs):.2f}% after "
            f"{steps} steps, means of {len(ours)} seeds "
            f"({min(ours):.2f}–{max(ours):.2f}% against "
            f"{min(theirs):.2f}–{max(theirs):.2f}%)")


GPT_COMPRESSORS = ("gradwire", "ddp-psgd4", "psgd4x2")


def mean_metric(models, model, method):
    return mean(r["metric"] for r in model_runs(models, model, method))


@figure("gpt_gap", POWERSGD)
def gpt_gap(models):
    # The default (Top-K 1%), gradwire's powersgd with its two exchanges
    # (its default since 18b386c) and PyTorch's PowerSGD hook, rank 4, each
    # over its seeds against DDP's over its own; the one-exchange powersgd4
    # rows are the form before that default.
    ddp = mean_metric(models, "gpt", "ddp")
    above = [mean_metric(models, "gpt", m) / ddp - 1
             for m in GPT_COMPRESSORS]
    return f"{100 * min(above):.0f}–{100 * max(above):.0f}%"


@figure("gpt_gap_runs", POWERSGD)
def gpt_gap_runs(models):
    counts = {len(model_runs(models, "gpt", m))
              for m in GPT_COMPRESSORS + ("ddp",)}
    if len(counts) != 1:
        raise ValueError("the GPT's methods ran different numbers of seeds")
    runs = model_runs(models, "gpt", *GPT_COMPRESSORS)
    steps = listed(str(s) for s in sorted({r["steps"] for r in runs}))
    return f"{steps} steps, means of {counts.pop()} seeds each"


@figure("gpt_default_vs_hook", POWERSGD)
def gpt_default_vs_hook(models):
    ours = {r["seed"]: r for r in model_runs(models, "gpt", "gradwire")}
    hook = {r["seed"]: r for r in model_runs(models, "gpt", "ddp-psgd4")}
    shared = sorted(set(ours) & set(hook))
    lower = sum(ours[s]["metric"] < hook[s]["metric"] for s in shared)
    fewer = 1 - (median(r["bytes_per_worker_step"] for r in ours.values())
                 / median(r["bytes_per_worker_step"] for r in hook.values()))
    return (f"{mean(ours[s]['metric'] for s in shared):.2f} against "
            f"{mean(hook[s]['metric'] for s in shared):.2f}, lower on "
            f"{lower} of {len(shared)} seeds, with {100 * fewer:.0f}% "
            "fewer bytes")


def accuracy_and_bytes(runs):
    return (f"{100 * mean(r['metric'] for r in runs):.2f}% at "
            f"{megabytes(median(r['bytes_per_worker_step'] for r in runs))}")


@figure("resnet_powersgd", POWERSGD)
def resnet_powersgd(models):
    return accuracy_and_bytes(model_runs(models, "resnet", "psgd4x2")) + \
        " a step"


@figure("resnet_topk", POWERSGD)
def resnet_topk(models):
    return accuracy_and_bytes(model_runs(models, "resnet", "gradwire"))


@figure("resnet_powersgd_seeds", POWERSGD)
def resnet_powersgd_seeds(models):
    counts = {len(model_runs(models, "resnet", m))
              for m in ("psgd4x2", "gradwire")}
    if len(counts) != 1:
        raise ValueError("the two methods ran different numbers of seeds")
    return f"means of {counts.pop()} seeds each"


@figure("resnet_ddp_powersgd", POWERSGD)
def resnet_ddp_powersgd(models):
    runs = model_runs(models, "resnet", "ddp-psgd4")
    return accuracy_and_bytes(runs) + f" a step (mean of {len(runs)} seeds)"
