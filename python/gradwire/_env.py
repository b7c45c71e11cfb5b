"""The environment contract: who this process is and where the shards are.

``gradwire run`` (and any launcher that follows the same contract) starts
each process with these variables, so that a training script needs no
command-line flags of gradwire's own:

  GRADWIRE_SHARDS           shard addresses "host:port,host:port", in
                            shard-id order (required)
  RANK, WORLD_SIZE          this process's rank among all of the job's
                            processes, and their number (torchrun's names;
                            default 0 and 1)
  LOCAL_RANK,               its rank among the processes on this host, and
  LOCAL_WORLD_SIZE          their number (default 0 and 1); the processes of
                            one host average their gradients before pushing
  GRADWIRE_LOCAL_STORE      "host:port" of the host's c10d store, with
                            LOCAL_WORLD_SIZE > 1 (default 127.0.0.1 at
                            MASTER_PORT + 1, MASTER_PORT 29500 if unset)
  GRADWIRE_TLS_CA, GRADWIRE_TLS_CERT, GRADWIRE_TLS_KEY,
  GRADWIRE_TLS_SERVER_NAME, GRADWIRE_AUTH_TOKEN_FILE
                            TLS and the bearer token of the shard
                            connections (file paths; unset: plaintext, no
                            token)
  GRADWIRE_ALLOW_INSECURE_TOKEN
                            1 (or true/yes): send the token without TLS,
                            which is refused otherwise (0/false/unset)

A process is a rank of the world size; a node is a host, whose processes
push together: node_rank is RANK // LOCAL_WORLD_SIZE and num_nodes
WORLD_SIZE // LOCAL_WORLD_SIZE (the extension's worker_id and
num_workers).

The GRADWIRE_* variables are those of the settings that the table of
settings marks "env" (docs/reference/settings.md, gradwire.settings()).
"""

import dataclasses
import os

from gradwire import _C, _renamed


def _setting_variables():
    """(keyword, variable, type, default) of every setting the environment
    sets, GRADWIRE_SHARDS aside (read by _shards)."""
    return [(s["name"], s["environment"], s["type"], s["default"])
            for s in _C.settings()
            if s["environment"] is not None and s["name"] != "shards"]


@dataclasses.dataclass(frozen=True)
class Environment:
    """What init() read from the environment: ``rank`` and ``size`` (the
    world size) of this process, ``local_rank`` and ``local_size`` on its
    node, ``node_rank`` and ``num_nodes``."""
    shards: tuple
    rank: int
    size: int
    local_rank: int
    local_size: int
    local_store: str
    transport: dict

    @property
    def node_rank(self):
        """This node's (host's) index: RANK // LOCAL_WORLD_SIZE."""
        return self.rank // self.local_size

    @property
    def num_nodes(self):
        """The number of nodes (hosts): WORLD_SIZE // LOCAL_WORLD_SIZE."""
        return self.size // self.local_size

    @property
    def worker_id(self):
        """The old name of node_rank; warns once."""
        _renamed.warn_once("Environment.worker_id", "Environment.worker_id "
                           "is deprecated: use Environment.node_rank", 2)
        return self.node_rank

    @property
    def num_workers(self):
        """The old name of num_nodes; warns once."""
        _renamed.warn_once("Environment.num_workers", "Environment."
                           "num_workers is deprecated: use "
                           "Environment.num_nodes", 2)
        return self.num_nodes

    def sync_options(self):
        """The ParameterSync keywords this environment sets."""
        options = dict(shards=list(self.shards), node_rank=self.node_rank,
                       num_nodes=self.num_nodes,
                       local_rank=self.local_rank,
                       local_size=self.local_size,
                       local_store=self.local_store)
        options.update(self.transport)
        return options


_environment = None


def _integer(environ, name, default, minimum):
    text = environ.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} must be at least {minimum}")
    return value


def _shards(environ):
    text = environ.get("GRADWIRE_SHARDS", "").strip()
    if not text:
        raise ValueError(
            "GRADWIRE_SHARDS is not set: start the script with `gradwire run "
            "-n WORKERS -- python SCRIPT`, or set GRADWIRE_SHARDS to the "
            "shard addresses (host:port,host:port)")
    shards = tuple(address.strip() for address in text.split(","))
    for address in shards:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"GRADWIRE_SHARDS: {address!r} is not host:port")
    return shards


def _flag(environ, name):
    text = environ.get(name, "").strip().lower()
    if text in ("", "0", "false", "no"):
        return False
    if text in ("1", "true", "yes"):
        return True
    raise ValueError(f"{name}={environ[name]!r} is not 1/true/yes or "
                     "0/false/no")


def read_environment(environ=None):
    """Reads and checks the contract (see the module's doc) from
    ``environ`` (default os.environ). Raises ValueError naming the variable
    that is missing or wrong."""
    environ = os.environ if environ is None else environ
    shards = _shards(environ)
    size = _integer(environ, "WORLD_SIZE", 1, 1)
    rank = _integer(environ, "RANK", 0, 0)
    if rank >= size:
        raise ValueError(f"RANK={rank} must be below WORLD_SIZE={size}")
    local_size = _integer(environ, "LOCAL_WORLD_SIZE", 1, 1)
    local_rank = _integer(environ, "LOCAL_RANK", rank % local_size, 0)
    if local_rank >= local_size:
        raise ValueError(f"LOCAL_RANK={local_rank} must be below "
                         f"LOCAL_WORLD_SIZE={local_size}")
    if size % local_size != 0:
        raise ValueError(f"WORLD_SIZE={size} is not a multiple of "
                         f"LOCAL_WORLD_SIZE={local_size}")
    if rank % local_size != local_rank:
        raise ValueError(
            f"RANK={rank} and LOCAL_RANK={local_rank} disagree: ranks of "
            f"one host must be consecutive (RANK % LOCAL_WORLD_SIZE)")
    # Set variables only: an unset one leaves the setting's default.
    transport = {}
    local_store = None
    for key, name, kind, default in _setting_variables():
        if kind == "bool":
            if _flag(environ, name):
                transport[key] = True
        elif key == "local_store":
            local_store = environ.get(name, default)
        elif environ.get(name):
            transport[key] = environ[name]
    return Environment(
        shards=shards, rank=rank, size=size, local_rank=local_rank,
        local_size=local_size, local_store=local_store, transport=transport)


def init():
    """Reads this process's place in the job from the environment (see the
    module's doc) and keeps it for rank(), size(), ..., ParameterSync and
    DistributedOptimizer, which then need no shards, node_rank or
    num_nodes. Returns the Environment. Raises ValueError naming a
    missing or wrong variable."""
    global _environment
    _environment = read_environment()
    return _environment


def environment():
    """The Environment init() read (calls init() the first time)."""
    return _environment if _environment is not None else init()


def rank():
    """This process's rank in the job (RANK)."""
    return environment().rank


def size():
    """The world size: the number of processes in the job (WORLD_SIZE)."""
    return environment().size


def local_rank():
    """This process's rank on its host (LOCAL_RANK)."""
    return environment().local_rank


def local_size():
    """The number of processes on this host (LOCAL_WORLD_SIZE)."""
    return environment().local_size


def shard_addresses():
    """The shard addresses (GRADWIRE_SHARDS), in shard-id order."""
    return list(environment().shards)


def with_environment(options):
    """``options`` (ParameterSync keywords) completed from the environment
    when they name no shards: what they set wins."""
    if "shards" in options:
        return dict(options)
    completed = environment().sync_options()
    completed.update(options)
    return completed
