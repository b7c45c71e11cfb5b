"""The environment contract (gradwire.init and gradwire._env): what a
script started by `gradwire run` reads, and the errors that name the
variable when one is missing or wrong."""

import pytest

import gradwire
from gradwire import _env

BASE = {"GRADWIRE_SHARDS": "127.0.0.1:7000,10.0.0.2:7001", "RANK": "3",
        "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


def test_reads_torchrun_names_and_the_shards():
    env = _env.read_environment(BASE)
    assert env.shards == ("127.0.0.1:7000", "10.0.0.2:7001")
    assert (env.rank, env.size, env.local_rank, env.local_size) == (3, 4, 1, 2)
    # gradwire's nodes are hosts: rank 3 of 2 per host is host 1 of 2.
    assert (env.node_rank, env.num_nodes) == (1, 2)
    options = env.sync_options()
    assert options["shards"] == ["127.0.0.1:7000", "10.0.0.2:7001"]
    assert options["node_rank"] == 1 and options["local_rank"] == 1


def test_defaults_to_one_process():
    env = _env.read_environment({"GRADWIRE_SHARDS": "h:1"})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (0, 1, 0, 1)
    assert env.transport == {}


def test_tls_and_token_files_come_from_the_environment():
    env = _env.read_environment(dict(
        BASE, GRADWIRE_TLS_CA="/ca.pem", GRADWIRE_AUTH_TOKEN_FILE="/token"))
    assert env.transport == {"tls_ca": "/ca.pem", "auth_token_file": "/token"}


@pytest.mark.parametrize("value, allowed", [
    ("1", True), ("true", True), ("YES", True), ("0", False), ("", False)])
def test_insecure_token_is_allowed_only_when_asked(value, allowed):
    env = _env.read_environment(dict(
        BASE, GRADWIRE_AUTH_TOKEN_FILE="/token",
        GRADWIRE_ALLOW_INSECURE_TOKEN=value))
    assert env.transport.get("allow_insecure_token", False) is allowed
    assert env.sync_options().get("allow_insecure_token", False) is allowed


def test_a_bad_insecure_token_value_is_named():
    with pytest.raises(ValueError, match="GRADWIRE_ALLOW_INSECURE_TOKEN='x'"):
        _env.read_environment(dict(BASE, GRADWIRE_ALLOW_INSECURE_TOKEN="x"))


@pytest.mark.parametrize("change, message", [
    ({"GRADWIRE_SHARDS": None}, "GRADWIRE_SHARDS is not set"),
    ({"GRADWIRE_SHARDS": "nohost"}, "GRADWIRE_SHARDS: 'nohost'"),
    ({"GRADWIRE_SHARDS": "h:99999"}, "GRADWIRE_SHARDS: 'h:99999'"),
    ({"RANK": "4"}, "RANK=4 must be below WORLD_SIZE=4"),
    ({"RANK": "x"}, "RANK='x' is not an integer"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be at least 1"),
    ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2 must be below LOCAL_WORLD_SIZE=2"),
    ({"WORLD_SIZE": "3", "RANK": "2", "LOCAL_RANK": "0"},
     "WORLD_SIZE=3 is not a multiple of LOCAL_WORLD_SIZE=2"),
    ({"LOCAL_RANK": "0"}, "RANK=3 and LOCAL_RANK=0 disagree"),
])
def test_bad_variables_are_named(change, message):
    environ = dict(BASE)
    for name, value in change.items():
        if value is None:
            environ.pop(name)
        else:
            environ[name] = value
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        _env.read_environment(environ)


def test_init_and_the_accessors(monkeypatch):
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    env = gradwire.init()
    assert gradwire.rank() == 3 and gradwire.size() == 4
    assert gradwire.local_rank() == 1 and gradwire.local_size() == 2
    assert gradwire.shard_addresses() == list(env.shards)
    monkeypatch.delenv("GRADWIRE_SHARDS")
    with pytest.raises(ValueError, match="GRADWIRE_SHARDS"):
        gradwire.init()


def test_explicit_options_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("GRADWIRE_SHARDS", "h:1")
    gradwire.init()
    assert _env.with_environment({"shards": ["x:2"]}) == {"shards": ["x:2"]}
    completed = _env.with_environment({"node_rank": 0})
    assert completed["shards"] == ["h:1"] and completed["node_rank"] == 0


def test_compression_is_one_object():
    assert gradwire.Compression.of(None).pull_for_aggregation() == "exact"
    none = gradwire.Compression.of({"compressor": "none"})
    assert none.pull_for_aggregation() == "dense"
    assert gradwire.Compression("qsgd").pull_for_aggregation() == "auto"
    # auto pushes Top-K or whole tensors: its mean comes back exactly too.
    assert gradwire.Compression("auto").pull_for_aggregation() == "exact"
    assert gradwire.Compression("topk", pull="delta").pull_for_aggregation() \
        == "delta"
    with pytest.raises(ValueError, match="unknown option 'ratoi'"):
        gradwire.Compression("topk", ratoi=0.1)


def test_compression_from_the_environment(monkeypatch):
    monkeypatch.delenv("GRADWIRE_COMPRESSION", raising=False)
    assert gradwire.Compression.of(None) == gradwire.Compression("topk")
    monkeypatch.setenv("GRADWIRE_COMPRESSION", "topk,ratio=0.05,pull=delta")
    chosen = gradwire.Compression.of(None)
    assert chosen == gradwire.Compression("topk", ratio=0.05, pull="delta")
    monkeypatch.setenv("GRADWIRE_COMPRESSION", " none ")
    assert gradwire.Compression.of(None).compressor == "none"
    # A script's own choice wins over the environment.
    assert gradwire.Compression.of({"compressor": "fp16"}).compressor == \
        "fp16"
    assert gradwire.Compression.parse(
        "qsgd,levels=16,error_feedback=false").options == {
            "levels": 16, "error_feedback": False}


@pytest.mark.parametrize("spec, message", [
    ("ratio=0.1", "expected 'compressor"),
    ("topk,ratio", "'ratio' is not key=value"),
    ("topk,ratoi=0.1", "unknown option 'ratoi'"),
])
def test_a_bad_compression_variable_is_named(monkeypatch, spec, message):
    monkeypatch.setenv("GRADWIRE_COMPRESSION", spec)
    with pytest.raises(ValueError, match="GRADWIRE_COMPRESSION") as error:
        gradwire.Compression.of(None)
    assert message in str(error.value)
