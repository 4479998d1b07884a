"""The user message that tells the model why its structured answer was refused.

It is a plain user message, so it needs a mark of its own: history policies must keep
it in the exchange of the question and the answer it refers to (see
:func:`~agcore_tools.cycle.history.split_exchanges`). As with the attachments message,
the mark is in the text, so it survives a JSON round trip of the history and sends
nothing a provider could refuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["feedback_message", "is_feedback_message"]

_OPENING = "Your answer is not a valid "
_ASK_JSON = "Answer again with the corrected JSON only."
_ASK_CALL = "Call final_result again with corrected arguments."


def feedback_message(label: str, problems: Sequence[str], *, tool: bool) -> dict[str, Any]:
    """The user message asking again for a ``label`` answer, with what was wrong.

    Example:
        >>> feedback_message("City", ["name: Field required"], tool=False)["content"]
        'Your answer is not a valid City: name: Field required. Answer again with the corrected JSON only.'
    """
    return {"role": "user", "content": feedback_text(label, problems, tool=tool)}


def feedback_text(label: str, problems: Sequence[str], *, tool: bool) -> str:
    """What :func:`feedback_message` says (a ``final_result`` call's error says it too)."""
    ask = _ASK_CALL if tool else _ASK_JSON
    return f"{_OPENING}{label}: {'; '.join(problems)}. {ask}"


def is_feedback_message(message: Mapping[str, Any], previous: Mapping[str, Any] | None) -> bool:
    """Whether ``message`` is a :func:`feedback_message` right after the answer (or the
    tool messages answering the calls) it refers to.

    Example:
        >>> answer = {"role": "assistant", "content": "{}"}
        >>> is_feedback_message(feedback_message("City", ["x"], tool=False), answer)
        True
        >>> is_feedback_message({"role": "user", "content": "Thanks!"}, answer)
        False
    """
    if message.get("role") != "user" or previous is None:
        return False
    if previous.get("role") not in ("assistant", "tool"):
        return False
    content = message.get("content")
    return (
        isinstance(content, str)
        and content.startswith(_OPENING)
        and content.endswith((_ASK_JSON, _ASK_CALL))
    )
