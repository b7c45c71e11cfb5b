"""The names a script passes, mapped to the package's own.

gradwire's Python keywords say ``node`` for a host: ``node_rank`` (the
host's index, RANK // LOCAL_WORLD_SIZE) and ``num_nodes`` (WORLD_SIZE //
LOCAL_WORLD_SIZE); a process is a rank of ``world_size`` (gradwire.rank(),
gradwire.size()). The extension keeps the C++ names (worker_id,
num_workers), so this module maps one to the other at the boundary.

The names of the release before still work, and each warns once per
process with the name to use instead:

* the keywords ``worker_id`` and ``num_workers``;
* compression keywords passed loose to ParameterSync (``ratio=0.01``
  instead of ``compression=gradwire.Compression("topk", ratio=0.01)``);
* ``gradwire.tune_heap`` (now gradwire.tuning), ``gradwire.load_fashion_mnist``
  and ``gradwire.FASHION_MNIST_DIR`` (now gradwire.datasets).
"""

import importlib
import warnings

# FutureWarning, not DeprecationWarning: the code to change is a training
# script or its helper modules, and Python hides DeprecationWarning raised
# outside __main__, where the people who must edit the script never see it.
CATEGORY = FutureWarning

#: Old keyword -> the keyword that replaced it. The values are the
#: extension's own keywords in reverse (EXTENSION_KEYWORDS).
RENAMED_KEYWORDS = {"worker_id": "node_rank", "num_workers": "num_nodes"}
#: Python keyword -> the extension's (C++) keyword.
EXTENSION_KEYWORDS = {new: old for old, new in RENAMED_KEYWORDS.items()}
#: Old top-level attribute of gradwire -> the module that holds it now.
MOVED_ATTRIBUTES = {"tune_heap": "gradwire.tuning",
                    "load_fashion_mnist": "gradwire.datasets",
                    "FASHION_MNIST_DIR": "gradwire.datasets"}

# The old forms warned about in this process, so that each warns once.
_warned = set()


def warn_once(old, message, stacklevel):
    """Warns CATEGORY with ``message`` the first time ``old`` is used in
    this process; ``stacklevel`` counts from the caller of warn_once."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(message, CATEGORY, stacklevel=stacklevel + 1)


def renamed_keywords(options, where, stacklevel):
    """``options`` (a dict of keywords) with each old keyword replaced by
    its new one, warning once per old keyword. Raises ValueError when both
    an old keyword and its new one are given. ``where`` names the callee in
    messages; ``stacklevel`` counts from the caller of renamed_keywords."""
    options = dict(options)
    for old, new in RENAMED_KEYWORDS.items():
        if old not in options:
            continue
        if new in options:
            raise ValueError(f"{old} and {new}: both given to {where}; "
                             f"{old} is the old name of {new}, pass {new} "
                             "only")
        warn_once(old, f"{where}({old}=...) is deprecated and will be "
                  f"removed in the next release: pass {new}=... (the same "
                  "value: a node is a host)", stacklevel + 1)
        options[new] = options.pop(old)
    return options


def loose_compression(options, keys, stacklevel):
    """Warns once when ``options`` (ParameterSync's keywords) hold any of
    the compression ``keys`` loose instead of in ``compression=``."""
    loose = [key for key in keys if key in options]
    if not loose:
        return
    given = ", ".join(f"{key}=..." for key in loose)
    warn_once("loose compression keywords",
              f"ParameterSync({given}): compression keywords passed loose "
              "are deprecated and will be removed in the next release: "
              "pass compression=gradwire.Compression(...) with them",
              stacklevel + 1)


def extension_keywords(options):
    """``options`` with the Python keywords the extension names otherwise
    (node_rank, num_nodes) under its names. An extension name given
    directly (the package's own callers) passes as it is; both at once
    raise ValueError."""
    options = dict(options)
    for new, old in EXTENSION_KEYWORDS.items():
        if new not in options:
            continue
        if old in options:
            raise ValueError(f"{old} and {new}: both given; {old} is the "
                             f"old name of {new}, pass {new} only")
        options[old] = options.pop(new)
    return options


def python_message(message):
    """An extension's error ``message`` that starts with a keyword it names
    otherwise ("worker_id: 3 is outside [0, 2)"), under the Python name
    ("node_rank: ..."); other messages as they are."""
    for new, old in EXTENSION_KEYWORDS.items():
        if message.startswith(old + ":"):
            return new + message[len(old):]
    return message


def moved_attribute(name):
    """The value of gradwire's old top-level attribute ``name``, warning
    once; AttributeError for any other name (a module __getattr__)."""
    home = MOVED_ATTRIBUTES.get(name)
    if home is None:
        raise AttributeError(f"module 'gradwire' has no attribute '{name}'")
    warn_once(name, f"gradwire.{name} is deprecated and will be removed in "
              f"the next release: use {home}.{name}", 3)
    return getattr(importlib.import_module(home), name)
