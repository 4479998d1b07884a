"""``definitions()`` never hides a tool silently: the permission checker's refusals are logged."""

from __future__ import annotations

import logging

import pytest

from agcore_tools import PermissionChecker, PermissionConfig, ToolRegistry

from .test_pipeline import SchemaTool


def test_hidden_tools_are_logged_once_per_tool_set_with_the_rule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    registry.register(SchemaTool("read", {"type": "object"}, ["read"]))
    registry.register(SchemaTool("rm", {"type": "object"}, ["write", "delete"]))
    with caplog.at_level(logging.WARNING, "agcore_tools.registry"):
        assert [d["function"]["name"] for d in registry.definitions()] == ["read"]
        registry.definitions(api="responses")
        registry.register(SchemaTool("ls", {"type": "object"}, ["read"]))
        registry.definitions()  # rebuilt, same hidden set: no second line
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "definitions() leaves out 1 of 2 tool(s), which the permission checker refuses: "
        "tool 'rm' needs 'write', which is not in the allowed list"
    ]
    strict = ToolRegistry(PermissionChecker(PermissionConfig(allow_unspecified=False)))
    strict.register(SchemaTool("bare", {"type": "object"}))
    with caplog.at_level(logging.WARNING, "agcore_tools.registry"):
        assert strict.definitions() == []
    assert (
        caplog.records[-1]
        .getMessage()
        .endswith(
            "tool 'bare' declares no permissions, which is not allowed (allow_unspecified is off)"
        )
    )
