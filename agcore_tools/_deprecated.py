"""One warning for every public name that gave way to a clearer one.

Old names keep working for a release; each use warns, naming the new one, at the
caller's line. Each is also marked ``@typing_extensions.deprecated(..., category=None)``
with the same message, for type checkers and IDEs: ``category=None``, because the
decorator's own warning would come on top of this one.
"""

from __future__ import annotations

import sys
import warnings
from types import FrameType

__all__ = ["renamed"]

# The module whose wrappers turn a misspelt keyword into the library's error
# (checks_keywords): named, not imported, as the two are independent in the layers.
_KEYWORD_WRAPPERS = f"{__name__.rpartition('.')[0]}._keywords"


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``.

    ``stacklevel=3`` points at the caller of the function or property that calls this;
    the frame of a keyword-checking wrapper in between is skipped (the warning pointed at
    the library, which Python's default filters hide, instead of the caller's line).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     renamed("A.old", "A.new")
        >>> str(caught[0].message)
        'A.old is deprecated; use A.new'
    """
    frame: FrameType | None = sys._getframe()
    for _ in range(stacklevel - 1):
        frame = frame.f_back if frame is not None else None
    while frame is not None and frame.f_globals.get("__name__") == _KEYWORD_WRAPPERS:
        frame = frame.f_back
        stacklevel += 1
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)
