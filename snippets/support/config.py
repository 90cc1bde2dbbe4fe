"""The project's config style: pydantic models that are frozen, strict and closed to unknown fields."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field

PositiveInt = Annotated[int, Field(strict=True, ge=1)]
"""A whole number of at least 1: the one positive-integer type, for configs and command lines."""


class Config(BaseModel):
    """The project's config style: frozen, no unknown fields, no coercion (``True`` is not a size)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, use_attribute_docstrings=True
    )

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated like a new config (pydantic's ``model_copy`` is not)."""
        return self.model_validate(self.model_dump() | changes)
