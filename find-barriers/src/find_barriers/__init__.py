"""find-barriers: where XLA's ``Sharding`` calls block a ``transpose(dot)`` fold, read from a
step's HLO with the standard library only (no JAX).

The names here are the public API; modules with a leading underscore are private. With JAX,
:mod:`find_barriers.jax` reads a ``jax.stages.Lowered`` and :mod:`find_barriers.testing` gates a
step in a test."""

import sys

__version__ = "0.3.0"

if sys.version_info >= (3, 10):  # noqa: UP036 - an older one is told what to install
    from find_barriers._check import Checked, Finding, Result, check, check_module
    from find_barriers._cli import main
    from find_barriers._cost import Cost, measured_copy_bytes
    from find_barriers._dumps import BEFORE, Module, read_module, read_modules
    from find_barriers._frames import readable
    from find_barriers._loops import run_counts
    from find_barriers._program import (
        Frame,
        HloProgram,
        Instruction,
        Program,
        Value,
        attribute_dims,
        callees,
        instructions,
        is_sharding_call,
        read_hlo,
        tuple_index,
    )
    from find_barriers._rules import RULES, Rule, rule_of
    from find_barriers._shapes import DTYPE_BYTES, array_shapes, elements, elements_of, shape_bytes
    from find_barriers._sites import TransposeSite, find_sites, value_source
    from find_barriers._vocabulary import Placement, Role, Status, Verdict

    __all__ = [
        "BEFORE",
        "DTYPE_BYTES",
        "RULES",
        "Checked",
        "Cost",
        "Finding",
        "Frame",
        "HloProgram",
        "Instruction",
        "Module",
        "Placement",
        "Program",
        "Result",
        "Role",
        "Rule",
        "Status",
        "TransposeSite",
        "Value",
        "Verdict",
        "__version__",
        "array_shapes",
        "attribute_dims",
        "callees",
        "check",
        "check_module",
        "elements",
        "elements_of",
        "find_sites",
        "instructions",
        "is_sharding_call",
        "main",
        "measured_copy_bytes",
        "read_hlo",
        "read_module",
        "read_modules",
        "readable",
        "rule_of",
        "run_counts",
        "shape_bytes",
        "tuple_index",
        "value_source",
    ]

    for _name in __all__:  # documented and printed as find_barriers.X, where they are public
        if getattr(_public := globals()[_name], "__module__", "").startswith("find_barriers._"):
            _public.__module__ = __name__
