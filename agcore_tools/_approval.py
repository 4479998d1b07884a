"""The former home of the approval screening in :mod:`agcore_tools.calls`, kept so that
old imports work."""

from .calls import answers_by_id, apply_answers, approval_requests, screen_calls

__all__ = ["answers_by_id", "apply_answers", "approval_requests", "screen_calls"]
