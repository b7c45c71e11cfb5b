"""A bearer token crosses the network in clear only when asked to."""

import pytest
import torch

import gradwire


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "auth-token"
    path.write_text("a" * 64 + "\n")
    return str(path)


def test_a_token_without_tls_is_refused(token_file):
    with pytest.raises(ValueError, match="without TLS: the token would "
                       "cross the network in clear.*--allow-insecure-token"):
        gradwire.ParameterSync(shards=["127.0.0.1:1"], auth_token_file=token_file)


def test_a_token_without_tls_is_sent_when_allowed(start_shards, token_file,
                                                  capfd):
    shard, = start_shards(1, 1, f"--auth-token-file={token_file}",
                          "--allow-insecure-token")
    sync = gradwire.ParameterSync(shards=[shard.address], node_rank=0,
                                  num_nodes=1, auth_token_file=token_file,
                                  allow_insecure_token=True)
    model = torch.nn.Linear(4, 2)
    sync.register(model.named_parameters(), overlap=False)
    model(torch.randn(3, 4)).sum().backward()
    sync.step()
    sync.close()
    assert "warning: --auth-token-file=" in capfd.readouterr().err
