"""A typed JSON column: a SQLAlchemy type bound to a pydantic model (or any type pydantic reads).

``mapped_column(TypedJSON(SettleResult))`` stores a ``SettleResult`` as JSON (JSONB on
PostgreSQL) and gives a ``SettleResult`` back: the value is validated on its way in and again on
its way out, so a row that does not fit the model fails where it is read, naming the field.
Non-finite floats, which JSON cannot carry, are stored as the strings ``"NaN"``, ``"Infinity"``
and ``"-Infinity"`` (pydantic reads them back as floats).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import JSON
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


def json_safe(value: Any) -> Any:
    """``value`` (plain JSON data) with every non-finite float replaced by its JSON-safe string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


class TypedJSON(TypeDecorator[Any]):
    """JSON (JSONB on PostgreSQL) holding values of ``kind``, validated on write and on read;
    Python None is SQL NULL."""

    impl = JSON
    cache_ok = True

    def __init__(self, kind: Any) -> None:
        super().__init__(none_as_null=True)
        self.kind = kind
        self._adapter: TypeAdapter[Any] = TypeAdapter(kind)

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """JSONB on PostgreSQL (indexable, compact), JSON elsewhere."""
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(JSON(none_as_null=True))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Validate ``value`` as ``kind`` and turn it into plain JSON data."""
        if value is None:
            return None
        valid = self._adapter.validate_python(value)
        return json_safe(self._adapter.dump_python(valid, mode="json"))

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Validate stored JSON data back into ``kind``."""
        if value is None:
            return None
        return self._adapter.validate_python(value)
