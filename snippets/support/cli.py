"""What every ``python -m snippets NAME`` shares: one ``error:`` line for bad input, memory bounds."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn


class SetupError(RuntimeError):
    """The process cannot run what was asked, and the fix is in its environment, not the input."""


class Parser(argparse.ArgumentParser):
    """An argument parser with ``--debug`` and ``--json`` (unless ``json_help`` is None) whose
    usage errors are one ``error:`` line, exit 2."""

    def __init__(self, doc: str, json_help: str | None = "print JSON instead of text"):
        super().__init__(description=doc.strip().splitlines()[0])
        self.add_argument("--debug", action="store_true", help="show the traceback of an error")
        if json_help is not None:
            self.add_argument("--json", action="store_true", help=json_help)

    def error(self, message: str) -> NoReturn:
        """Print one line naming the bad argument, then exit with status 2."""
        self.exit(2, f"error: {message} (see --help)\n")


def one_line(error: BaseException) -> str:
    """``error``'s message on one line; a pydantic error lists each field, its problem and input."""
    pydantic = sys.modules.get("pydantic")  # none imported (find-barriers), none of its errors
    if pydantic is not None and isinstance(error, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or error.title}: {e['msg']} (got {e['input']!r})"
            for e in error.errors(include_url=False)
        )
    return " ".join(str(error).split())


@contextlib.contextmanager
def reported(debug: bool) -> Iterator[None]:
    """Turn a ValueError or SetupError raised inside into one ``error:`` line and exit status 2."""
    try:
        yield
    except (ValueError, SetupError) as error:
        if debug:
            raise
        sys.stderr.write(f"error: {one_line(error)}\n")
        raise SystemExit(2) from None


def positive_int(text: str) -> int:
    """An argparse type: ``text``, in decimal digits, as a :data:`~snippets.support.config.PositiveInt`."""
    from pydantic import TypeAdapter, ValidationError  # here: find-barriers imports no pydantic

    from snippets.support.config import PositiveInt

    if text.isascii() and text.isdigit():
        with contextlib.suppress(ValidationError):
            return TypeAdapter(PositiveInt).validate_python(int(text))
    raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")


def run_module(main: Callable[[], object]) -> None:
    """Run a command line's ``main``; a pipe closed early (``| head``) is quiet."""
    try:
        main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet at exit, too
        raise SystemExit(1) from None


def available_memory() -> int:
    """Bytes of memory this process can still allocate: MemAvailable, capped by a cgroup limit."""
    available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError):
        cgroup = Path("/sys/fs/cgroup")
        limit = int((cgroup / "memory.max").read_text())
        available = min(available, limit - int((cgroup / "memory.current").read_text()))
    return available


def check_memory(nbytes: int, what: str, fix: str = "choose smaller sizes") -> None:
    """Raise ValueError, before any allocation, if ``what`` needs more memory than is free."""
    available = available_memory()
    if nbytes > available:
        raise ValueError(
            f"{what} needs about {nbytes / 2**30:.3g} GiB but {available / 2**30:.3g} GiB of "
            f"memory is available; {fix}."
        )
