"""The Python names: node_rank and num_nodes for a host, gradwire.tuning
and gradwire.datasets for the module-level knobs, gradwire.Compression for
compression settings, and one layout of gradwire's part of a state dict.
Each old name still works for one release and warns once, naming the new
one; an old name with its new one is refused; old checkpoints load."""

import pathlib
import re
import warnings

import pytest
import torch

import gradwire
import gradwire.torch
from gradwire import _C, _env, _renamed, _state_dict
from conftest import run_in_threads

ROOT = pathlib.Path(__file__).resolve().parents[2]
PART_FIELDS = {"node_rank", "num_nodes", "next_step", "worker_state"}


@pytest.fixture(autouse=True)
def fresh_warnings():
    # Each old form warns once per process: start every test unwarned.
    _renamed._warned.clear()
    yield
    _renamed._warned.clear()


def warned(call):
    """(call()'s result, the messages of the FutureWarnings it raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught
                    if issubclass(w.category, FutureWarning)]


def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 2))


def one_step(net, step):
    net.zero_grad()
    net(torch.randn(4, 8)).square().sum().backward()
    step()


def sync_on(shards, **options):
    options.setdefault("compression", gradwire.Compression("topk", ratio=0.1))
    return gradwire.ParameterSync(shards=[s.address for s in shards],
                                  optimizer="sgd", lr=0.1, **options)


def optimizer_on(shards, net, **options):
    return gradwire.torch.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.1), net,
        compression={"dense_below": 0},
        shards=[s.address for s in shards], **options)


# Module-level names.

def test_the_new_homes_hold_the_module_level_names():
    (heap, reader, folder), messages = warned(lambda: (
        gradwire.tuning.tune_heap, gradwire.datasets.load_fashion_mnist,
        gradwire.datasets.FASHION_MNIST_DIR))
    assert heap is _C.tune_heap and callable(reader)
    assert folder == "/usr/share/datasets/fashion-mnist"
    assert messages == []
    for name in _renamed.MOVED_ATTRIBUTES:
        assert name not in gradwire.__all__


@pytest.mark.parametrize("name, home", sorted(
    _renamed.MOVED_ATTRIBUTES.items()))
def test_an_old_module_level_name_warns_once_and_works(name, home):
    value, messages = warned(lambda: getattr(gradwire, name))
    assert value is getattr(getattr(gradwire, home.split(".")[1]), name)
    assert len(messages) == 1 and f"use {home}.{name}" in messages[0]
    _, again = warned(lambda: getattr(gradwire, name))
    assert again == []


def test_from_import_of_an_old_name_works_and_unknown_names_fail():
    def imported():
        from gradwire import tune_heap
        return tune_heap
    value, messages = warned(imported)
    assert value is _C.tune_heap and len(messages) == 1
    with pytest.raises(AttributeError, match="no attribute 'tune_heaps'"):
        gradwire.tune_heaps


def test_the_tuning_table_in_the_docs_has_the_settings_defaults():
    text = (ROOT / "docs" / "python.md").read_text()
    defaults = gradwire.tuning.defaults()
    assert set(defaults) == set(gradwire.tuning.KEYWORDS)
    for key, default in defaults.items():
        row = re.search(rf"^\| `{key}` \| `([^`]*)` \|", text, re.MULTILINE)
        assert row, f"docs/python.md: no tuning row for {key}"
        assert row.group(1) == repr(default), (key, row.group(1), default)


# The environment.

def test_the_environment_says_node():
    env = _env.read_environment({"GRADWIRE_SHARDS": "h:1", "RANK": "3",
                                 "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                                 "LOCAL_WORLD_SIZE": "2"})
    (node, nodes, options), messages = warned(
        lambda: (env.node_rank, env.num_nodes, env.sync_options()))
    assert (node, nodes) == (1, 2) and messages == []
    assert (options["node_rank"], options["num_nodes"]) == (1, 2)
    assert "worker_id" not in options and "num_workers" not in options
    old, messages = warned(lambda: (env.worker_id, env.num_workers))
    assert old == (1, 2) and len(messages) == 2
    assert "Environment.node_rank" in messages[0]
    assert "Environment.num_nodes" in messages[1]
    assert warned(lambda: env.worker_id)[1] == []


# Keywords.

def test_node_keywords_reach_the_extension_under_its_names():
    with pytest.raises(ValueError, match=r"^node_rank: 3 is outside \[0, 2\)"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], node_rank=3,
                               num_nodes=2)
    with pytest.raises(ValueError, match="^num_nodes: 0 is outside"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], num_nodes=0)


def test_old_keywords_of_parameter_sync_warn_once_and_work(start_shards):
    shards = start_shards(1, 2)
    sync, messages = warned(lambda: sync_on(shards, worker_id=1,
                                            num_workers=2))
    assert len(messages) == 2
    assert "ParameterSync(worker_id=...)" in messages[0]
    assert "pass node_rank=..." in messages[0]
    assert "pass num_nodes=..." in messages[1]
    syncs = [sync_on(shards, node_rank=0, num_nodes=2), sync]
    nets = [model(), model()]

    def work(node):
        syncs[node].register(nets[node].named_parameters(), overlap=False)
        one_step(nets[node], syncs[node].step)

    run_in_threads(work, 2)
    for node in (0, 1):
        part = syncs[node].state_dict()["gradwire"]
        assert (part["node_rank"], part["num_nodes"]) == (node, 2)
        syncs[node].close()
    # Once per process: a second sync with the old names is silent.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="^node_rank: 2 is outside"):
            gradwire.ParameterSync(shards=["127.0.0.1:1"], worker_id=2,
                                   num_workers=2)
    assert [w for w in caught if issubclass(w.category, FutureWarning)] == []


def test_old_keywords_of_the_optimizer_and_the_hook_warn(start_shards):
    shards = start_shards(1, 1)
    optimizer, messages = warned(lambda: optimizer_on(
        shards, model(), worker_id=0, num_workers=1))
    assert len(messages) == 2
    assert "DistributedOptimizer(worker_id=...)" in messages[0]
    assert "node_rank" in messages[0] and "num_nodes" in messages[1]
    part = optimizer.state_dict()["gradwire"]
    assert (part["node_rank"], part["num_nodes"]) == (0, 1)
    optimizer.close()
    _renamed._warned.clear()
    state, messages = warned(lambda: gradwire.torch.DDPHookState(
        shards=[shards[0].address], worker_id=0, num_workers=1))
    assert "DDPHookState(worker_id=...)" in messages[0]
    assert state._sync_options["node_rank"] == 0


def test_new_keywords_do_not_warn(start_shards):
    shards = start_shards(1, 1)
    net = model()
    (sync, optimizer, _), messages = warned(lambda: (
        sync_on(shards, node_rank=0, num_nodes=1),
        optimizer_on(start_shards(1, 1), net, node_rank=0, num_nodes=1),
        gradwire.torch.DDPHookState(node_rank=0, num_nodes=1)))
    assert messages == []
    sync.close()
    optimizer.close()


@pytest.mark.parametrize("old, new", sorted(
    _renamed.RENAMED_KEYWORDS.items()))
def test_an_old_keyword_beside_its_new_one_is_refused(old, new):
    both = {old: 0, new: 0}
    match = f"^{old} and {new}: both given"
    with pytest.raises(ValueError, match=match):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], **both)
    with pytest.raises(ValueError, match=match):
        gradwire.torch.DistributedOptimizer(
            torch.optim.SGD(model().parameters(), lr=0.1),
            shards=["127.0.0.1:1"], **both)
    with pytest.raises(ValueError, match=match):
        gradwire.torch.DDPHookState(**both)


def test_loose_compression_keywords_warn_and_work(start_shards):
    shards = start_shards(1, 1)
    sync, messages = warned(lambda: gradwire.ParameterSync(
        shards=[shards[0].address], compressor="topk", ratio=0.1))
    assert len(messages) == 1
    assert "ParameterSync(compressor=..., ratio=...)" in messages[0]
    assert "compression=gradwire.Compression(...)" in messages[0]
    sync.close()
    # A dict is as good as a Compression, and silent.
    (by_dict, by_object), messages = warned(lambda: (
        sync_on(shards, compression={"compressor": "topk", "ratio": 0.1}),
        sync_on(shards)))
    assert messages == []
    by_dict.close()
    by_object.close()


# State dicts.

def test_the_state_dict_layouts_agree(start_shards, monkeypatch, tmp_path):
    shards = start_shards(1, 1)
    monkeypatch.setenv("GRADWIRE_SHARDS", shards[0].address)
    gradwire.init()
    net = model()
    sync = sync_on(shards)
    sync.register(net.named_parameters(), overlap=False)
    one_step(net, sync.step)
    by_sync = sync.state_dict()
    assert set(by_sync) == {"gradwire"}
    assert set(by_sync["gradwire"]) == PART_FIELDS
    other = model()
    optimizer = optimizer_on(start_shards(1, 1), other)
    one_step(other, optimizer.step)
    by_optimizer = optimizer.state_dict()
    assert set(by_optimizer["gradwire"]) == PART_FIELDS
    for state in (by_sync, by_optimizer):
        part = state["gradwire"]
        assert (part["node_rank"], part["num_nodes"]) == (0, 1)
        assert part["next_step"] == 1
        assert isinstance(part["worker_state"], bytes)
    optimizer.close()
    # load_checkpoint reads a ParameterSync's checkpoint as an optimizer's.
    gradwire.torch.save_checkpoint(tmp_path / "sync.pt", net, sync, epoch=1)
    sync.close()
    again = sync_on(shards)
    again.register(model().named_parameters(), overlap=False)
    assert gradwire.torch.load_checkpoint(
        tmp_path / "sync.pt", net, again) == {"epoch": 1}
    assert again.state_dict() == by_sync
    again.close()


def test_an_old_parameter_sync_state_dict_loads(start_shards):
    shards = start_shards(1, 1)
    net = model()
    sync = sync_on(shards)
    sync.register(net.named_parameters(), overlap=False)
    one_step(net, sync.step)
    part = sync.state_dict()["gradwire"]
    sync.close()
    # The layout of the release before, written by hand.
    old = {"next_step": part["next_step"],
           "worker_state": part["worker_state"]}
    again = sync_on(shards)
    again.register(model().named_parameters(), overlap=False)
    again.load_state_dict(old)
    assert again.state_dict()["gradwire"] == part
    with pytest.raises(ValueError, match="no 'gradwire' entry"):
        again.load_state_dict({})
    again.close()


def test_an_old_optimizer_checkpoint_loads(start_shards, monkeypatch,
                                           tmp_path):
    shards = start_shards(1, 1)
    monkeypatch.setenv("GRADWIRE_SHARDS", shards[0].address)
    gradwire.init()
    net = model()
    optimizer = optimizer_on(shards, net)
    one_step(net, optimizer.step)
    state = optimizer.state_dict()
    part = state.pop("gradwire")
    optimizer.close()
    # The layout of the release before, written by hand: the host was
    # worker_id of num_workers.
    state["gradwire"] = {"worker_id": part["node_rank"],
                         "num_workers": part["num_nodes"],
                         "next_step": part["next_step"],
                         "worker_state": part["worker_state"]}
    torch.save({"model": net.state_dict(), "optimizer": state,
                "extra": {}}, tmp_path / "old.pt")
    restarted = model()
    again = optimizer_on(shards, restarted)
    assert again.next_step == 1
    gradwire.torch.load_checkpoint(tmp_path / "old.pt", restarted, again)
    assert again.state_dict()["gradwire"] == part
    one_step(restarted, again.step)
    assert again.next_step == 2
    again.close()


def test_old_fields_are_read_under_their_new_names():
    ours, rest = _state_dict.split_worker_state(
        {"state": {}, "gradwire": {"worker_id": 1, "num_workers": 2,
                                   "next_step": 5, "worker_state": b"x"}})
    assert ours == {"node_rank": 1, "num_nodes": 2, "next_step": 5,
                    "worker_state": b"x"}
    assert rest == {"state": {}}
    with pytest.raises(ValueError, match="no 'gradwire' entry"):
        _state_dict.split_worker_state({"next_step": 5, "worker_state": b""})
