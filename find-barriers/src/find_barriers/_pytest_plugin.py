"""find-barriers' pytest plugin (entry point ``pytest11``): the ``assert_no_blocked_folds``
fixture, configured by the ini options ``find_barriers_baseline`` and ``find_barriers_min_bytes``.
JAX is imported only when a test asks for the fixture."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """The two ini options the fixture reads."""
    parser.addini(
        "find_barriers_baseline",
        "find-barriers: the baseline file the assert_no_blocked_folds fixture accepts "
        "(relative to the rootdir)",
        default="",
    )
    parser.addini(
        "find_barriers_min_bytes",
        "find-barriers: fail on a blocked weight gradient only if its estimated cost is this "
        "many bytes a step or more (default 1: one the estimate prices at nothing passes)",
        default="1",
    )


@pytest.fixture
def assert_no_blocked_folds(request: pytest.FixtureRequest) -> Callable[..., None]:
    """:func:`find_barriers.testing.assert_no_blocked_folds` with the project's baseline and cost
    threshold; a keyword given in the call overrides them."""
    from find_barriers.testing import assert_no_blocked_folds as check  # noqa: PLC0415 - JAX

    config = request.config
    baseline = config.getini("find_barriers_baseline")
    text = config.getini("find_barriers_min_bytes")
    if not (text.isascii() and text.isdigit()):
        raise pytest.UsageError(
            f"find_barriers_min_bytes = {text!r} is not a whole number of bytes"
        )
    defaults: dict[str, Any] = {"min_bytes": int(text)}
    if baseline:
        defaults["baseline"] = config.rootpath / baseline
    return functools.partial(check, **defaults)
