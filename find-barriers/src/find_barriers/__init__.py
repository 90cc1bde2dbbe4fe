"""find-barriers: where XLA's ``Sharding`` calls block a ``transpose(dot)`` fold, read from a
step's HLO dump with the standard library only (no JAX)."""

import sys

__version__ = "0.1.0"

if sys.version_info >= (3, 10):  # noqa: UP036 - an older one is told what to install
    from find_barriers.dumps import Module, read_module, read_modules
    from find_barriers.program import Instruction, Program, read_hlo
    from find_barriers.sites import TransposeSite, find_sites

    __all__ = [
        "Instruction",
        "Module",
        "Program",
        "TransposeSite",
        "__version__",
        "find_sites",
        "read_hlo",
        "read_module",
        "read_modules",
    ]
