"""A check's outcome: ``ok``, what it read, or its whole error normalised; an aborted interpreter's."""

import subprocess
import sys

import pytest
from jax.sharding import AxisType

from snippets.measure.mode_checks.layouts import typed_sharding
from snippets.measure.mode_checks.outcomes import aborted, isolated_outcome, message, outcome


def test_an_outcome_is_ok_what_was_read_or_the_whole_error():
    def raises(axis_type):
        where = "This error occurs at source:  /x/y.py:12:3 (f)"
        raise ValueError(f"{axis_type.name} refused at 0x7f3a2c. {where}\n\nmore\nlines")

    assert outcome(lambda axis_type: None, AxisType.Explicit) == "ok"
    assert outcome(lambda axis_type: axis_type.name, AxisType.Auto) == "ok: Auto"
    assert outcome(raises, AxisType.Auto) == (
        "ValueError: Auto refused at 0x.... This error occurs at source:  <source> (f)"
        "\n\nmore\nlines"
    )
    assert message(KeyError()) == "KeyError"


def test_an_aborted_interpreter_is_an_outcome():
    """The closure program of jax-ml/jax#29162 aborted Python with a failed XLA check."""
    code = "import os, sys; sys.stderr.write('F0602 10:01:02.345678 77 x.cc:9] Check failed\\n'); os.abort()"
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert aborted(result.returncode, result.stderr) == (
        "Aborted: signal SIGABRT: x.cc:9] Check failed"
    )
    assert aborted(3, "Traceback ...\nSystemExit: /a/b.py:4 failed") == (
        "Aborted: exit 3: SystemExit: <source> failed"
    )


@pytest.mark.needs_devices(4)
def test_an_isolated_outcome_is_the_one_this_interpreter_gets():
    """The fresh interpreter finds the check by its module and name, with this one's devices."""
    for axis_type in (AxisType.Explicit, AxisType.Auto):
        assert isolated_outcome(typed_sharding, axis_type) == outcome(typed_sharding, axis_type)
