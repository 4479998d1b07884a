"""Where a tool's function was defined, so that registering a tool under a taken name
can tell a redefinition (a re-run notebook cell, ``exec``, a reload: it replaces the
old tool) from a collision (two functions wanting one name: refused).

Kept apart from :mod:`agcore_tools._function_tool`, which only asks
:meth:`Origin.redefines`: the rules read code objects, ``functools.partial`` chains and
IPython's execution count, nothing of a tool.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["Origin", "caller_stacklevel", "interactive_run"]


def _in_package(frame: types.FrameType) -> bool:
    module = str(frame.f_globals.get("__name__", ""))
    return module == "agcore_tools" or module.startswith("agcore_tools.")


def caller_stacklevel() -> int:
    """The ``stacklevel``, for a ``warnings.warn()`` in the caller, of the first frame
    outside this package: the user's line that made the tool.

    Example:
        >>> caller_stacklevel() >= 1
        True
    """
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _in_package(frame):
        frame, level = frame.f_back, level + 1
    return level


def interactive_run() -> int | None:
    """The IPython cell execution running now, if any: tools made in a later cell
    replace those of an earlier one. None outside IPython.

    Example:
        >>> interactive_run() is None  # not in IPython
        True
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    count = getattr(shell, "execution_count", None)
    return count if isinstance(count, int) else None


@dataclass(frozen=True)
class Origin:
    """Where a tool's function comes from, to tell a redefinition from a collision.

    Example:
        >>> def f() -> None: ...
        >>> Origin.of(f).redefines(Origin.of(f))
        True
    """

    module: str
    qualname: str
    code: Any
    """The innermost code object: a re-run cell or an ``exec`` compiles a new one."""
    target: Any
    """The callable itself (a bound method for a bound tool)."""
    run: int | None
    """The IPython execution count when the tool was made, outside IPython None."""

    @classmethod
    def of(cls, func: Any) -> Origin:
        """The origin of ``func``: a function, a bound method, a callable object or a
        ``functools.partial`` of one (read through to what it wraps)."""
        inner = func
        while isinstance(inner, functools.partial):
            inner = inner.func
        source = inner if inspect.isroutine(inner) or inspect.isclass(inner) else type(inner)
        compiled = type(inner).__call__ if source is not inner else inner
        return cls(
            getattr(source, "__module__", None) or "",
            getattr(source, "__qualname__", None) or "",
            getattr(inspect.unwrap(compiled), "__code__", None),
            func,
            interactive_run(),
        )

    def redefines(self, other: Origin) -> bool:
        """Whether a tool from here may replace ``other``'s under the same name."""
        if (self.module, self.qualname) != (other.module, other.qualname) or not self.qualname:
            return False
        if self.code is not other.code:
            return True  # the definition itself ran again: a re-run cell, exec, reload
        if self.target is other.target or (
            inspect.ismethod(self.target) and bool(self.target == other.target)
        ):
            return True  # the same function (or the same instance's method) again
        # Same code, another function object: a factory's second product, unless a
        # later notebook cell made it.
        return self.run is not None and self.run != other.run
