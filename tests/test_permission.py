from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agcore_tools import Permission, PermissionChecker, PermissionConfig, PermissionDeniedError
from agcore_tools.error import ToolConfigError, ToolError

BUILTINS = [
    Permission.READ,
    Permission.WRITE,
    Permission.DELETE,
    Permission.NETWORK,
    Permission.SHELL,
    Permission.FILESYSTEM,
]
UNIVERSE = [*BUILTINS, Permission.custom("db:write"), Permission.custom("read")]


def test_builtins_are_distinct_hashable_values() -> None:
    assert len(set(BUILTINS)) == 6
    assert Permission.parse("READ") is Permission.READ
    assert {Permission.custom("a:b"): 1}[Permission.custom("a:b")] == 1


def test_custom_never_equals_builtin_of_same_name() -> None:
    assert Permission.custom("read") != Permission.READ
    assert Permission.custom("read") == Permission.custom("read")
    assert hash(Permission.custom("x:y")) == hash(Permission.custom("x:y"))


def test_unknown_permission_name_is_refused_with_a_hint() -> None:
    with pytest.raises(ToolError, match=r"Permission.custom\('fly'\)"):
        Permission.parse("fly")
    with pytest.raises(ToolError, match="non-empty"):
        Permission.custom("  ")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: PermissionChecker("read"), "PermissionChecker takes a PermissionConfig or None"),
        (lambda: PermissionChecker(["read"]), "got list: use PermissionChecker(PermissionConfig("),
        (lambda: Permission(5), "a permission's name must be a non-empty string, got 5"),
        (lambda: Permission(""), "a permission's name must be a non-empty string, got ''"),
        (lambda: Permission("read", "yes"), "is_custom must be True or False, got 'yes'"),
        (
            lambda: PermissionConfig(allowed=[], allow_unspecified="false"),
            "allow_unspecified must be True or False, got str 'false'",
        ),
        (
            lambda: PermissionConfig(allow_unspecified=0),
            "allow_unspecified must be True or False, got int 0",
        ),
        # Each a bare TypeError: 'int' (or 'NoneType') object is not iterable.
        (
            lambda: PermissionConfig(allowed=5),
            "PermissionConfig.allowed must be a list of permissions (Permission values or "
            "names such as 'read'), got int",
        ),
        (lambda: PermissionConfig(ask=5.0), "PermissionConfig.ask must be a list"),
        (
            lambda: PermissionChecker().check("t", None),
            "PermissionChecker.check() permissions must be a list of permissions (Permission "
            "values or names such as 'read'), got NoneType: pass [] for a tool that declares none",
        ),
        (lambda: PermissionChecker().check("t", 5), "check() permissions must be a list"),
        (lambda: PermissionChecker().is_allowed(5), "is_allowed() permissions must be a list"),
    ],
    ids=[
        "checker-str",
        "checker-list",
        "permission-int",
        "permission-empty",
        "is-custom",
        "allow-unspecified-str",
        "allow-unspecified-int",
        "allowed-int",
        "ask-float",
        "check-none",
        "check-int",
        "is-allowed-int",
    ],
)
def test_caller_mistakes_are_refused_when_made(make: Any, named: str) -> None:
    # A PermissionChecker("read") was accepted, then every invoke raised AttributeError.
    with pytest.raises(ToolConfigError) as info:
        make()
    assert named in str(info.value)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("field", "default"),
    [("allowed", "read, network"), ("denied", "delete, shell"), ("ask", "none")],
)
def test_a_permission_set_given_as_a_mapping_or_none_is_refused(field: str, default: str) -> None:
    # Before: a mapping gave its keys ({"read": True, "shell": False} allowed shell), and
    # None gave an empty set (allowed=None turned the whitelist off, denied=None the
    # denial of delete and shell): each widened the policy without a word.
    with pytest.raises(ToolConfigError) as info:
        PermissionConfig(**{field: {"read": True, "shell": False}})
    assert str(info.value) == (
        f"PermissionConfig.{field} must be a list of permissions, got dict: list the ones "
        "that are on, [name for name, on in mapping.items() if on]"
    )
    with pytest.raises(ToolConfigError) as info:
        PermissionConfig(**{field: None})
    assert str(info.value) == (
        f"PermissionConfig.{field} must be a list of permissions, got None: leave it out "
        f"for the default ({default}), or pass [] for none"
    )
    assert isinstance(info.value, ValueError)
    # Leaving the field out, or naming the permissions, is what the messages say.
    assert PermissionConfig(**{field: ["read"]}) == PermissionConfig(**{field: ("read",)})


def test_every_permission_name_ignores_case_and_surrounding_spaces() -> None:
    # Before: built-in names ignored case but custom ones were matched exactly, so
    # denied=[custom("mcp:GitHub")], or "mcp:github " from a config file, denied nothing.
    github = Permission.custom("mcp:github")
    assert Permission.custom("mcp:GitHub") == Permission.custom(" mcp:github ") == github
    assert Permission.custom("MCP:GitHub").name == "mcp:github"
    assert Permission.parse(" Shell ") is Permission.SHELL
    for spelt in ("mcp:GitHub", "mcp:github ", " MCP:GITHUB"):
        checker = PermissionChecker(PermissionConfig(allowed=[], denied=[Permission.custom(spelt)]))
        with pytest.raises(PermissionDeniedError, match="needs 'mcp:github', which is denied"):
            checker.check("list_repos", ["write", github])
    assert not PermissionChecker(PermissionConfig(denied=[" SHELL"])).is_allowed(["shell"])


@pytest.mark.parametrize(
    "make",
    [
        lambda: Permission.custom("mcp:*"),
        lambda: Permission.custom("billing:refun?"),
        lambda: Permission.parse("*"),
        lambda: PermissionConfig(denied=["mcp:*"]),
    ],
    ids=["custom-star", "custom-question-mark", "parse-star", "config-name"],
)
def test_a_permission_name_with_a_wildcard_is_refused(make: Any) -> None:
    # Taken literally, denied=[custom("mcp:*")] matched no permission: it denied nothing.
    with pytest.raises(ToolConfigError) as info:
        make()
    assert str(info.value).endswith(
        "is a pattern, and patterns are not supported: list each permission"
    )
    assert isinstance(info.value, ValueError)


def test_default_config_is_the_seeds() -> None:
    cfg = PermissionConfig()
    assert cfg.allowed == {Permission.READ, Permission.NETWORK}
    assert cfg.denied == {Permission.DELETE, Permission.SHELL}
    assert cfg.allow_unspecified is True


def test_config_accepts_names() -> None:
    cfg = PermissionConfig(allowed=["read", Permission.custom("db:read")], denied=["shell"])
    assert cfg.allowed == {Permission.READ, Permission.custom("db:read")}


def test_denied_wins_over_allowed() -> None:
    checker = PermissionChecker(PermissionConfig(allowed=["shell"], denied=["shell"]))
    with pytest.raises(PermissionDeniedError) as info:
        checker.check("run", ["shell"])
    assert info.value.tool_name == "run"
    assert info.value.permission == "shell"
    assert "run" in str(info.value) and "'shell'" in str(info.value)


def test_whitelist_refuses_what_it_does_not_list() -> None:
    checker = PermissionChecker(PermissionConfig(allowed=["read"], denied=[]))
    checker.check("cat", ["read"])
    with pytest.raises(PermissionDeniedError, match="not in the allowed list"):
        checker.check("cp", ["read", "write"])


def test_empty_allowed_list_defers_to_allow_unspecified() -> None:
    open_ = PermissionChecker(PermissionConfig(allowed=[], denied=[], allow_unspecified=True))
    closed = PermissionChecker(PermissionConfig(allowed=[], denied=[], allow_unspecified=False))
    open_.check("t", ["write"])
    with pytest.raises(PermissionDeniedError, match="allow_unspecified"):
        closed.check("t", ["write"])


def test_tool_without_permissions_passes_iff_allow_unspecified() -> None:
    PermissionChecker(PermissionConfig(allow_unspecified=True)).check("t", [])
    with pytest.raises(PermissionDeniedError, match="declares no permissions"):
        PermissionChecker(PermissionConfig(allow_unspecified=False)).check("t", [])


def test_custom_permission_does_not_match_builtin_rule() -> None:
    checker = PermissionChecker(PermissionConfig(allowed=["read"], denied=[]))
    with pytest.raises(PermissionDeniedError):
        checker.check("t", [Permission.custom("read")])


def test_the_guide_numbers_the_rules_as_the_checker_applies_them() -> None:
    # The list, the worked example and the summary once numbered them three ways.
    order = ["denied", "ask", "allowed passes", "whitelist", "allow_unspecified"]
    guide = (Path(__file__).parents[1] / "docs" / "guides" / "permissions.md").read_text()
    listed = re.findall(r"^(\d)\. (.+)$", guide.split("## The rules, in order")[1], re.M)
    examples = re.findall(r"^# Rule (\d): (.+)$", guide, re.M)
    summary = guide[guide.index("The rules apply in order") :].split("\n\n")[0]
    checker = (PermissionChecker.__doc__ or "").split("Rules, in order")[1].split("\n\n")[0]
    assert [n for n, _ in listed] == [n for n, _ in examples] == ["1", "2", "3", "4", "5"]
    for rule, (_, item), (_, example) in zip(order, listed, examples, strict=True):
        assert rule in item.lower() and rule in example.lower(), (item, example)
    for text in (summary, checker):
        at = [text.index(rule.split()[0]) for rule in order]
        assert at == sorted(at), text


def test_one_permission_given_alone_is_not_split_into_letters() -> None:
    # check("rm", "shell") once failed with "unknown permission 's'".
    checker = PermissionChecker()
    assert checker.is_allowed("read") and checker.is_allowed(Permission.READ)
    assert not checker.is_allowed("shell")
    checker.check("cat", "read")
    with pytest.raises(PermissionDeniedError, match="tool 'rm' needs 'shell', which is denied"):
        checker.check("rm", "shell")
    with pytest.raises(PermissionDeniedError, match="needs 'shell'"):
        checker.check("rm", Permission.SHELL)


def test_verdict_cache_does_not_confuse_strings_and_permissions() -> None:
    checker = PermissionChecker()
    checker.check("t", ("read",))
    checker.check("t", (Permission.READ,))
    with pytest.raises(PermissionDeniedError):
        checker.check("t", ("shell",))
    with pytest.raises(PermissionDeniedError):
        checker.check("t", (Permission.SHELL,))


def _reference(
    allowed: set[Permission], denied: set[Permission], unspecified: bool, perms: list[Permission]
) -> bool:
    """The four rules, written as plainly as possible, one permission at a time."""
    if not perms:
        return unspecified
    for p in perms:
        if p in denied:
            verdict = False
        elif p in allowed:
            verdict = True
        elif allowed:
            verdict = False
        else:
            verdict = unspecified
        if not verdict:
            return False
    return True


perm_sets = st.sets(st.sampled_from(UNIVERSE), max_size=4)


@given(perm_sets, perm_sets, st.booleans(), st.lists(st.sampled_from(UNIVERSE), max_size=4))
def test_checker_matches_reference_table(
    allowed: set[Permission], denied: set[Permission], unspecified: bool, perms: list[Permission]
) -> None:
    checker = PermissionChecker(PermissionConfig(allowed, denied, unspecified))
    expected = _reference(allowed, denied, unspecified, perms)
    assert checker.is_allowed(perms) is expected
    if expected:
        checker.check("t", perms)
    else:
        with pytest.raises(PermissionDeniedError):
            checker.check("t", perms)
