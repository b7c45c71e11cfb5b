"""The table of figures: each figure's id, its data files, and the function
that computes its text from them (figures.py reads FIGURES). The models'
figures are in figures_models.py; what all share is in figures_common.py.
"""

import figures_models  # noqa: F401 (registers the models' figures)
from figures_common import (AUTO, AUTO_GPT, COMPRESS, COMPRESS_25M, FIGURES, KERNELS,
                            LINKS, LOAD, LOAD_PUBLISH, LOAD_SHARED, NETWORK,
                            figure, listed, machine, machines, median,
                            spread, times)


# bench/auto/auto.sh's JSON: the CNN on shaped links, gradwire-worker
# against PyTorch DDP.

def auto_row(document, link, config):
    for row in document["rows"]:
        if row["link"] == link and row["config"] == config and \
                row["status"] == "ok":
            return row
    raise KeyError(f"no {config} row on {link}")


@figure("gpt_step_vs_hook_100mbit", AUTO_GPT)
def gpt_step_vs_hook_100mbit(auto_gpt):
    ours = auto_row(auto_gpt, "100mbit", "gradwire")
    hook = auto_row(auto_gpt, "100mbit", "ddp-psgd4")
    return (f"{ours['seconds_per_step']:.2f} s against "
            f"{hook['seconds_per_step']:.2f} s, "
            f"{times(ours['seconds_per_step'] / hook['seconds_per_step'])}"
            f" ({ours['steps']} steps, one run each)")


def versus_topk(document, link, peer):
    return auto_row(document, link, peer)["seconds_per_step"] / \
        auto_row(document, link, "topk1")["seconds_per_step"]


@figure("step_vs_ddp_100mbit", AUTO)
def step_vs_ddp_100mbit(auto):
    return times(versus_topk(auto, "100mbit", "ddp"))


@figure("step_vs_ddp_fp16_100mbit", AUTO)
def step_vs_ddp_fp16_100mbit(auto):
    return times(versus_topk(auto, "100mbit", "ddp-fp16"))


@figure("step_vs_compute_100mbit", AUTO)
def step_vs_compute_100mbit(auto):
    return times(auto_row(auto, "100mbit", "topk1")["vs_compute"])


@figure("step_vs_ddp_fast_links", AUTO)
def step_vs_ddp_fast_links(auto):
    return listed(f"{times(versus_topk(auto, link, 'ddp'))} {LINKS[link]}"
                  for link in ("1gbit", "unshaped"))


@figure("step_runs", AUTO)
def step_runs(auto):
    rows = [auto_row(auto, link, config)
            for link in ("100mbit", "1gbit", "unshaped")
            for config in ("topk1", "ddp", "ddp-fp16")]
    rows.append(auto_row(auto, "none", "compute"))
    steps = listed(str(s) for s in sorted({r["steps"] for r in rows}))
    return f"one {steps}-step run per row on a {machine(auto)}"


# gradwire-bench-load's JSON: 64 simulated workers against real shards.

def load_runs(*documents):
    return [run for d in documents for run in d["runs"]]


@figure("load_asp_setup", *LOAD)
def load_asp_setup(*documents):
    configs = {(d["config"]["workers"], d["config"]["mode"],
                d["config"]["shards"]) for d in documents}
    if len(configs) != 1:
        raise ValueError("the runs have different configurations")
    workers, mode, shards = configs.pop()
    return (f"{workers} simulated {mode.upper()} workers against "
            f"{shards} shards")


@figure("load_asp_params", *LOAD)
def load_asp_params(*documents):
    params = {d["config"]["params"] for d in documents}
    if len(params) != 1:
        raise ValueError("the runs have different models")
    return f"{params.pop():,} parameters"


@figure("load_asp_pushes", *LOAD)
def load_asp_pushes(*documents):
    rates = [r["pushes_per_s"] for r in load_runs(*documents)]
    return f"{median(rates):,.0f} pushes/s"


@figure("load_asp_spread", *LOAD)
def load_asp_spread(*documents):
    rates = [r["pushes_per_s"] for r in load_runs(*documents)]
    return spread(rates, lambda v: f"{v:,.0f}")


@figure("load_asp_errors", *LOAD)
def load_asp_errors(*documents):
    return f"{sum(r['errors'] for r in load_runs(*documents)):,} errors"


@figure("load_asp_latency", *LOAD)
def load_asp_latency(*documents):
    runs = load_runs(*documents)
    p50 = median(r["push_latency_ms"]["p50"] for r in runs)
    p99 = median(r["push_latency_ms"]["p99"] for r in runs)
    return f"Push p50 {p50:.1f} ms / p99 {p99:.1f} ms"


@figure("load_asp_memory", *LOAD)
def load_asp_memory(*documents):
    runs = load_runs(*documents)
    over = sum(1 for r in runs if not r["memory_ok"])
    return ("within its limit in every run" if not over else
            f"over its limit in {over} of {len(runs)} runs")


@figure("load_asp_pull_ratio", *LOAD)
def load_asp_pull_ratio(*documents):
    runs = load_runs(*documents)
    return f"{median(r['dense_pulls_vs_pulled'] for r in runs):.1f}×"


@figure("load_machine", *LOAD)
def load_machine(*documents):
    return machine(*documents)


@figure("load_shared_ratio", LOAD_SHARED)
def load_shared_ratio(shared):
    return times(shared["comparison"]["pushes_per_s_ratio"])


@figure("load_publish64_ratio", LOAD_PUBLISH)
def load_publish64_ratio(publish):
    return times(publish["comparison"]["pushes_per_s_ratio"])


@figure("load_compare_machine", LOAD_SHARED, LOAD_PUBLISH)
def load_compare_machine(*documents):
    return machine(*documents)


# gradwire-bench-compress's JSON.

def compress_row(document, compressor, ratio=None, threads=1, chunk=0,
                 numel=25_000_000):
    for row in document["results"]:
        if (row["compressor"], row["ratio"], row["threads"],
                row["chunk_elements"], row["numel"]) == \
                (compressor, ratio, threads, chunk, numel):
            return row
    raise KeyError(f"no {compressor} {ratio} row of {numel} elements on "
                   f"{threads} threads")


@figure("topk_wire_bytes", COMPRESS)
def topk_wire_bytes(compress):
    row = compress_row(compress, "topk", 0.01)
    return f"{row['wire_bytes_per_selected']:.2f}"


@figure("topk_wire_bytes_fp32", COMPRESS)
def topk_wire_bytes_fp32(compress):
    row = compress_row(compress, "topk", 0.01)
    return f"{row['wire_bytes_per_selected_fp32']:.2f}"


@figure("compress_run", COMPRESS)
def compress_run(compress):
    memcpy = compress_row(compress, "memcpy")["seconds"]
    kernels = KERNELS.get(compress["host"].get("instruction_set"), "?")
    return (f"25M floats, one thread, {kernels}, on a {machine(compress)}; "
            f"memcpy {1000 * memcpy:.2f} ms")


COMPRESSORS = (("none", None, "no compression with error feedback"),
               ("fp16", None, "fp16"), ("onebit", None, "1-bit"),
               ("qsgd", None, "QSGD"), ("topk", 0.001, "Top-K 0.1%"),
               ("topk", 0.01, "Top-K 1%"))


@figure("compress_ratios", COMPRESS)
def compress_ratios(compress):
    return ", ".join(
        f"{name} {compress_row(compress, c, r)['vs_memcpy']:.2f}×"
        for c, r, name in COMPRESSORS)


@figure("compress_topk", COMPRESS)
def compress_topk(compress):
    one = compress_row(compress, "topk", 0.01)
    two = compress_row(compress, "topk", 0.01, threads=2, chunk=1 << 20)
    return (f"{1000 * one['seconds']:.1f} ms; {two['vs_memcpy']:.2f}× on 2 "
            f"threads in 1M-float chunks; {one['vs_torch_topk']:.1f}× "
            "faster than `torch::abs().topk()`")


@figure("compress_25m_topk", COMPRESS_25M)
def compress_25m_topk(compress):
    memcpy = compress_row(compress, "memcpy")["seconds"]
    topk = compress_row(compress, "topk", 0.01)["vs_memcpy"]
    return f"{topk:.2f}× (memcpy {1000 * memcpy:.1f} ms)"


# bench/network/network.sh's JSON: shaped links, Top-K against compute.

@figure("network_vs_compute", *NETWORK)
def network_vs_compute(*documents):
    parts = [f"{times(d['topk_vs_compute'])}"
             f"{' the compute-only step' if i == 0 else ''} "
             f"{LINKS[d['link']]}" for i, d in enumerate(documents)]
    steps = listed(str(s) for s in sorted({d["steps"] for d in documents}))
    return f"{listed(parts)} ({steps} steps, one run each)"


# The machines behind every figure above.

@figure("figure_machines", *sorted({p for sources, _ in FIGURES.values()
                                    for p in sources}))
def figure_machines(*documents):
    named = [d for d in documents if machines(d)]
    return (f"{machine(*named)} machines; {len(documents) - len(named)} "
            f"of the "
            f"{len(documents)} data files behind them name no machine")

