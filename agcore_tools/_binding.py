"""What a method tool's function looks like to a type checker, for ``FunctionTool.__get__``.

A type checker passes ``@tool`` the function under ``@classmethod``, ``cls`` included,
as if ``@classmethod`` were not there; nothing in the function's type says it is a
classmethod. ``__get__`` is where ``cls`` (or ``self``) is bound at run time, and where
the receiver is known: its overloads match these protocols against the tool's own
parameters to drop the first one only when it takes that receiver.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from typing_extensions import ParamSpec

__all__ = ["TakesClass", "TakesReceiver"]

P = ParamSpec("P")
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class TakesClass(Protocol[T_contra, P, R_co]):
    """A callable whose first parameter is a class, as a classmethod's ``cls`` is."""

    def __call__(self, cls: type[T_contra], /, *args: P.args, **kwargs: P.kwargs) -> R_co:
        """Call it with the class first."""
        ...


class TakesReceiver(Protocol[T_contra, P, R_co]):
    """A callable whose first parameter takes a ``T_contra``, as a method's ``self`` does."""

    def __call__(self, receiver: T_contra, /, *args: P.args, **kwargs: P.kwargs) -> R_co:
        """Call it with the receiver first."""
        ...
