"""The pydantic bases every model of the package derives from: unknown fields are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A model that refuses fields it does not declare (results documents, their sections)."""

    model_config = ConfigDict(extra="forbid")


class FrozenModel(StrictModel):
    """A strict model that cannot be changed once built (model cards and their parts)."""

    model_config = ConfigDict(frozen=True)
