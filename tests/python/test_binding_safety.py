"""The binding never lets a step touch memory past a registered tensor, and
close() from another thread never frees the sync under a running step.

Each case runs in a child process: before these checks existed the
failure was silent corruption or a crash of the interpreter, and a test
must see a clean ValueError (or a clean close) instead."""

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

PRELUDE = textwrap.dedent("""
    import sys, threading, time
    import torch
    import gradwire

    def make_sync(address):
        sync = gradwire.ParameterSync(
            shards=[address], node_rank=0, num_nodes=1, compressor="topk",
            ratio=0.05, optimizer="sgd", lr=0.1, partition_bytes=1 << 16)
        torch.manual_seed(0)
        # Big enough that reading or writing a whole parameter past a
        # two-element replacement leaves the allocation by far.
        model = torch.nn.Sequential(torch.nn.Linear(256, 256),
                                    torch.nn.Linear(256, 4))
        sync.register(model.named_parameters(), overlap=False)
        return sync, model

    def train_step(sync, model):
        model.zero_grad()
        model(torch.randn(8, 256)).sum().backward()
        sync.step()

    # One step; prints NO ERROR, or the ValueError that refused it.
    def step_reporting_refusal(sync):
        try:
            sync.step()
            print("NO ERROR")
        except ValueError as error:
            print("VALUE ERROR:", error)
""")


def run_child(body, *args, timeout=120):
    """Runs PRELUDE + body in a fresh interpreter; returns (code, output)."""
    child = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)] + list(args),
        cwd=HERE, capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ))
    return child.returncode, child.stdout + child.stderr


def test_a_parameter_replaced_by_a_smaller_tensor_is_refused(start_shards):
    shard, = start_shards(1, 1)
    code, out = run_child("""
        sync, model = make_sync(sys.argv[1])
        train_step(sync, model)
        weight = model[0].weight
        saved = weight.data
        weight.data = torch.zeros(2)
        weight.grad = None
        step_reporting_refusal(sync)
        weight.data = saved
        train_step(sync, model)
        print("STEPPED AFTER RESTORING", sync.next_step)
        sync.close()
    """, shard.address)
    assert code == 0, out
    assert "VALUE ERROR: parameter 0 (0.weight) changed since register()" in \
        out, out
    assert "it now holds 2 float32 elements" in out, out
    assert "registered: 65536 float32 elements on cpu" in out, out
    assert "STEPPED AFTER RESTORING 2" in out, out


def test_an_expanded_gradient_is_refused(start_shards):
    shard, = start_shards(1, 1)
    code, out = run_child("""
        sync, model = make_sync(sys.argv[1])
        train_step(sync, model)
        model.zero_grad()
        model(torch.randn(8, 256)).sum().backward()
        weight = model[0].weight
        saved = weight.grad
        weight.grad = torch.ones(1, 1).expand(256, 256)
        step_reporting_refusal(sync)
        weight.grad = saved
        sync.step()
        print("STEPPED AFTER RESTORING", sync.next_step)
        sync.close()
    """, shard.address)
    assert code == 0, out
    assert "VALUE ERROR: parameter 0 (0.weight): its gradient is 65536 " \
        "float32 elements on cpu, not contiguous" in out, out
    assert "STEPPED AFTER RESTORING 2" in out, out


def test_close_from_another_thread_waits_for_the_running_step(start_shards):
    rounds = 20
    addresses = [start_shards(1, 1)[0].address for _ in range(rounds)]
    code, out = run_child("""
        closed_errors = 0
        for round, address in enumerate(sys.argv[1:]):
            sync, model = make_sync(address)
            outcome = []

            def steps():
                try:
                    while True:
                        train_step(sync, model)
                except gradwire.Error as error:
                    outcome.append(str(error))

            stepper = threading.Thread(target=steps)
            stepper.start()
            time.sleep(0.002 * (round % 10))
            sync.close()
            stepper.join(timeout=60)
            assert not stepper.is_alive(), "step() hung after close()"
            assert outcome and "FAILED_PRECONDITION" in outcome[0] and \\
                "closed" in outcome[0], outcome
            closed_errors += 1
            sync.close()  # Twice is harmless.
        print("ROUNDS", closed_errors)
    """, *addresses, timeout=300)
    assert code == 0, out
    assert f"ROUNDS {rounds}" in out, out


def test_a_pull_ahead_landing_after_p_data_was_replaced_writes_no_freed_memory(
        start_shards):
    """With pull ahead, step() returns before the pulls land; a p.data
    swapped right after it must not receive them (they go to the storage
    the plan was made for, which the binding keeps alive), and the next
    step refuses."""
    shard, = start_shards(1, 1)
    code, out = run_child("""
        import gc
        sync = gradwire.ParameterSync(
            shards=[sys.argv[1]], node_rank=0, num_nodes=1,
            compressor="topk", ratio=0.05, optimizer="sgd", lr=0.1,
            partition_bytes=1 << 16)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 256),
                                    torch.nn.Linear(256, 4))
        sync.register(model.named_parameters(), overlap=True)
        sync.pull_ahead(model)
        weight = model[0].weight
        model(torch.randn(8, 256)).sum().backward()
        sync.step()
        # This step's pulls may still be on their way; the old storage has
        # no other reference once replaced.
        weight.data = torch.full((256, 256), 7.0)
        gc.collect()
        time.sleep(0.2)
        print("UNTOUCHED", bool((weight.data == 7.0).all()))
        weight.grad = None
        step_reporting_refusal(sync)
        sync.close()
    """, shard.address)
    assert code == 0, out
    assert "UNTOUCHED True" in out, out
    assert "p.data was replaced" in out, out
