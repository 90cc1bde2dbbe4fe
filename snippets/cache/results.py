"""Results a guide and a test share: computed once per content of what produced them.

With ``SNIPPETS_RESULTS`` naming a folder (the tests set it), a :func:`shared` function's result
is stored there under a hash of its module's inputs (:mod:`snippets.cache.inputs`), its arguments
and the devices' platform, and read back by a later call anywhere (a concurrent one waits); unset,
the function just runs. A result that depends on the device count takes that count as an argument.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import inspect
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

import jax

from snippets.cache.inputs import Inputs

FOLDER = "SNIPPETS_RESULTS"
"""The environment variable naming the folder of shared results."""


def shared[**P, R](function: Callable[P, R]) -> Callable[P, R]:
    """``function``, its result stored in and read from ``$SNIPPETS_RESULTS`` when that is set."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        folder = os.environ.get(FOLDER)
        if not folder:
            return function(*args, **kwargs)
        path = Path(folder) / f"{function.__qualname__}-{result_key(function, args, kwargs)}.pickle"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.with_suffix(".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then reads
            if path.exists():
                return pickle.loads(path.read_bytes())
            result = function(*args, **kwargs)
            written = path.with_suffix(".partial")
            written.write_bytes(pickle.dumps(result))
            written.replace(path)
            return result

    return wrapper


def result_key(function: Callable, args: tuple, kwargs: dict) -> str:
    """A hash of what ``function(*args, **kwargs)`` reads: its module's inputs, the arguments
    with defaults filled in, and the devices' platform and kind."""
    top = inspect.getfile(sys.modules[function.__module__.partition(".")[0]])  # its __init__
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    device = jax.devices()[0]
    facts = [
        f"{function.__module__}.{function.__qualname__}",
        repr(sorted(bound.arguments.items())),
        f"{device.platform} {device.device_kind}",
        Inputs(Path(top).resolve().parents[1]).add_module(function.__module__).digest(),
    ]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:24]
