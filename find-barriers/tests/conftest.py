"""Shared by find-barriers' tests: the dumps in ``data/`` and the command line run in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from find_barriers._cli import main

DATA = Path(__file__).with_name("data")
"""XLA:CPU's dumps of the steps of ``tests/checker_models.py`` and ``tests/checker_patterns.py`` in
the site's repository (made by ``python -m tests.checker_fixtures`` there): a scanned stack with
gradient accumulation, the same with the kernel-order fix, three layers through one helper, each
with its model's lines shifted by one; and remat, tied-table and shard_map steps, each fixed too."""
MODEL = "/home/user/project/model.py"
"""Where the dumps say the model is."""
SHARED_DOT_LINE = 30
"""The line of ``checker_models.shared_dot``'s dot, the helper the three layers share."""
THREE_LAYER_LINES = (71, 72, 73)
"""The lines of ``ThreeLayers.__call__`` that call each layer."""
PROJECTION_LINES = (116, 117)
"""The lines of ``constrained_step``'s two projections."""


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def run(capsys):
    """``run(*argv)``: ``find-barriers ARGV`` in this process, as (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_info:
            main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run
