"""The table of settings seen from Python: gradwire.settings(), the
ParameterSync keywords made from it (type checks, unknown keywords, the
docstring), and the flags bench/python/worker.py takes from it."""

import importlib.util
import pathlib
import pydoc

import pytest

import gradwire
from gradwire import _env

ROOT = pathlib.Path(__file__).resolve().parents[2]


def settings():
    return {s["name"]: s for s in gradwire.settings()}


def test_settings_describe_every_keyword():
    table = settings()
    assert table["ratio"]["type"] == "float"
    assert table["ratio"]["default"] == 0.01
    assert (table["ratio"]["min"], table["ratio"]["max"]) == (0.0, 1.0)
    assert table["ratio"]["min_open"] and not table["ratio"]["max_open"]
    assert table["mode"]["choices"] == ["bsp", "asp", "ssp"]
    assert table["shards"]["type"] == "list[str]"
    assert table["shards"]["default"] == ["127.0.0.1:7000"]
    assert table["shards"]["environment"] == "GRADWIRE_SHARDS"
    assert table["error_feedback"]["default"] is True
    assert table["error_feedback"]["flag"] == "--error-feedback"
    assert table["staleness"]["conditional"]
    for setting in table.values():
        assert setting["keyword"] and setting["help"], setting["name"]


def test_unknown_keyword_names_the_nearest_one():
    with pytest.raises(TypeError, match="'compresor'.*'compressor'"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], compresor="topk")


@pytest.mark.parametrize("option, value, expected", [
    ("ratio", "0.1", "ratio: expected float, got str"),
    ("levels", 1.5, "levels: expected int, got float"),
    ("mode", 3, "mode: expected str, got int"),
    ("shards", "127.0.0.1:1", "shards: expected list"),
])
def test_a_value_of_another_type_is_a_type_error(option, value, expected):
    options = {"shards": ["127.0.0.1:1"], option: value}
    with pytest.raises(TypeError, match=expected.replace("[", r"\[")):
        gradwire._C.ParameterSync(**options)


def test_shards_are_required_by_the_engine():
    with pytest.raises(TypeError, match="shards"):
        gradwire._C.ParameterSync(ratio=0.1)


def test_a_value_outside_the_table_range_is_a_value_error():
    with pytest.raises(ValueError, match=r"^compress_threads: 2000 is outside"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], compress_threads=2000)


def test_the_docstring_lists_every_setting_with_its_default():
    text = pydoc.render_doc(gradwire.ParameterSync, renderer=pydoc.plaintext)
    for setting in gradwire.settings():
        assert setting["name"] + " (" in text, setting["name"]
    assert "fold_scale (float, default 0.4, in (0, 1])" in text
    assert "error_feedback (bool, default True)" in text
    # Help written for flags names the keywords in Python.
    assert "num_workers)" in text and "--num-workers" not in text


def test_the_environment_reads_the_settings_marked_env(monkeypatch):
    env = _env.read_environment({"GRADWIRE_SHARDS": "h:1",
                                 "GRADWIRE_LOCAL_STORE": "h:2",
                                 "GRADWIRE_TLS_SERVER_NAME": "shard"})
    assert env.local_store == "h:2"
    assert env.transport == {"tls_server_name": "shard"}
    assert _env.read_environment({"GRADWIRE_SHARDS": "h:1"}).local_store == \
        settings()["local_store"]["default"]


def test_compression_and_optimizer_keys_come_from_the_table():
    from gradwire import compression
    table = settings()
    assert set(compression.PUSH_KEYS) == {
        n for n, s in table.items()
        if s["group"] == "compression" and n != "compressor"}
    assert compression.PULL_KEYS == ("pull", "pull_ratio", "pull_value_type")


def test_train_py_has_a_flag_for_every_setting():
    spec = importlib.util.spec_from_file_location(
        "train_example", ROOT / "bench" / "python" / "worker.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    flags = {name for group in train.FLAG_GROUPS.values()
             for name, *_ in group}
    for setting in gradwire.settings():
        assert setting["name"].replace("_", "-") in flags, setting["name"]
    args = train.parse_flags(["--ratio=0.05", "--noerror-feedback"])
    assert args.ratio == 0.05 and args.error_feedback is False
    assert args.shards == "127.0.0.1:7000"
