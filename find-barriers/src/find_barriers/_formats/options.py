"""What the command line tells an output format beyond the run's result."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Options:
    """The run's exit status (JSON records it), ``--strict-baseline`` (a stale entry is an error),
    and the text's ``--quiet``, ``--verbose`` and the module paths it lists in full (``shown``)."""

    exit_status: int = 0
    strict: bool = False
    quiet: bool = False
    verbose: bool = False
    shown: frozenset[str] = frozenset()
