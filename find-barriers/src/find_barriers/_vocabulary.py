"""The checker's words, one ``str`` enum each: a site's verdict, role and placement, and a blocked
site's status. Each member equals, prints and serialises as its value (``"weight gradient"``)."""

from __future__ import annotations

import enum


class _Word(str, enum.Enum):
    """A word that compares, formats and serialises as its value on every supported Python."""

    def __str__(self) -> str:
        return self.value


class Verdict(_Word):
    """What XLA does with a site's transpose: ``blocked`` (a ``Sharding`` call stops the fold),
    ``pinned`` (XLA's simplifier keeps a weight gradient's transpose in either mode, and a
    ``Sharding`` call stops TPU's layout assignment from making it free), ``foldable``, or
    ``kept`` (XLA keeps it in either mode)."""

    BLOCKED = "blocked"
    PINNED = "pinned"
    FOLDABLE = "foldable"
    KEPT = "kept"


class Role(_Word):
    """What a site's dot computes, by where its value goes."""

    FORWARD = "forward"
    WEIGHT_GRADIENT = "weight gradient"
    ACTIVATION_GRADIENT = "activation gradient"
    UNKNOWN = "unknown"


class Placement(_Word):
    """What put a blocking ``Sharding`` call there: a result typed by an ``explicit`` mesh, or the
    user's ``with_sharding_constraint``."""

    EXPLICIT = "explicit"
    CONSTRAINT = "constraint"


class Status(_Word):
    """A blocked site's standing in a run: a ``new`` finding, ``accepted`` by the baseline,
    ``ignored`` (its rule is), or ``below`` the ``--min-bytes`` cost threshold."""

    NEW = "new"
    ACCEPTED = "accepted"
    IGNORED = "ignored"
    BELOW = "below"
