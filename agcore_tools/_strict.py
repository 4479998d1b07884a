"""The former home of the strict transform (now :mod:`agcore_tools.schema`), kept so
that old imports work."""

from .schema._strict import FORMATS, KEPT, strict_parameters

__all__ = ["FORMATS", "KEPT", "strict_parameters"]
