"""A tool's argument problems joined into the one reason its
:class:`~agcore_tools.InvalidArgumentsError` gives: a function tool's, as pydantic found
them, and an MCP tool's, as jsonschema found them. Pure, and light to import: a function
tool's error needs it, and jsonschema is loaded only by the MCP tools' check."""

from __future__ import annotations

from collections.abc import Sequence

from ..error import InvalidArgumentsError

__all__ = ["join_problems"]


def join_problems(problems: Sequence[tuple[str | None, str]], *, at_least: bool = False) -> str:
    """``field: problem; ...``: the first
    :attr:`InvalidArgumentsError.LISTED <agcore_tools.InvalidArgumentsError.LISTED>`
    problems, then how many more (a list of 100,000 bad items made a message of
    megabytes). A problem whose field is None is its message alone.

    ``at_least`` says the search for problems stopped before the end: the rest are
    counted as "at least", and at least one more is named even when all found are listed.

    Example:
        >>> join_problems([("a", "Field required"), (None, "too many keys")])
        'a: Field required; too many keys'
        >>> join_problems([(f"n.{i}", "Field required") for i in range(25)])[-54:]
        'n.18: Field required; n.19: Field required; and 5 more'
        >>> join_problems([("a", "Field required")], at_least=True)
        'a: Field required; and at least 1 more'
    """
    listed = InvalidArgumentsError.LISTED
    shown = [
        message if field is None else f"{field}: {message}" for field, message in problems[:listed]
    ]
    more = len(problems) - listed
    if more > 0 or at_least:
        shown.append(f"and {'at least ' if at_least else ''}{max(more, 1)} more")
    return "; ".join(shown)
