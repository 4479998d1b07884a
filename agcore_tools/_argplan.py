"""The former home of the argument plan (now :mod:`agcore_tools.schema`), kept so that
old imports work."""

from .schema._argplan import EXTRA_KEY, ArgumentPlan, build_plan

__all__ = ["EXTRA_KEY", "ArgumentPlan", "build_plan"]
