"""One warning for every public name that gave way to a clearer one.

Old names keep working for a release; each use warns, naming the new one, at the
caller's line. Each is also marked ``@typing_extensions.deprecated(..., category=None)``
with the same message, for type checkers and IDEs: ``category=None``, because the
decorator's own warning would come on top of this one.
"""

from __future__ import annotations

import warnings

__all__ = ["renamed"]


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``.

    ``stacklevel=3`` points at the caller of the function or property that calls this.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     renamed("A.old", "A.new")
        >>> str(caught[0].message)
        'A.old is deprecated; use A.new'
    """
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)
