"""Permissions a tool declares, and the static policy that checks them before a tool runs.

Example:
    >>> checker = PermissionChecker(PermissionConfig())
    >>> checker.check("read_file", [Permission.READ]) is None
    True
    >>> checker.check("rm", ["shell"])
    Traceback (most recent call last):
    ...
    agcore_tools.error.PermissionDeniedError: permission denied: tool 'rm' needs 'shell', which is denied
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from ._keywords import checks_init_keywords
from .error import PermissionDeniedError, ToolConfigError, ToolDefinitionError

__all__ = ["Permission", "PermissionChecker", "PermissionConfig", "PermissionLike"]


@dataclass(frozen=True, slots=True)
class Permission:
    """A permission a tool needs: one of the built-ins or a namespaced custom one.

    Built-ins are class attributes (``Permission.READ`` ...). Custom permissions come from
    :meth:`custom`; they never equal a built-in, even with the same name. Every name is
    matched the same way: :meth:`parse` and :meth:`custom` ignore case and surrounding
    spaces (the constructor keeps a name as it is given). Names are not patterns: one
    with ``*`` or ``?`` is refused.

    Example:
        >>> Permission.custom("db:write") == Permission.custom(" DB:Write ")
        True
        >>> Permission.custom("read") == Permission.READ
        False
        >>> Permission.parse(" Read") is Permission.READ
        True
    """

    name: str
    """The permission's name: ``"read"`` for a built-in, ``"ns:name"`` for a custom one."""
    is_custom: bool = False
    """True for permissions made with :meth:`custom`."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ToolConfigError(
                f"a permission's name must be a non-empty string, got {self.name!r}: use "
                "Permission.parse('read') for a built-in, Permission.custom('ns:name') otherwise"
            )
        if not isinstance(self.is_custom, bool):
            raise ToolConfigError(
                f"Permission.is_custom must be True or False, got {self.is_custom!r}"
            )

    READ: ClassVar[Permission]
    WRITE: ClassVar[Permission]
    DELETE: ClassVar[Permission]
    NETWORK: ClassVar[Permission]
    SHELL: ClassVar[Permission]
    FILESYSTEM: ClassVar[Permission]
    _BUILTINS: ClassVar[dict[str, Permission]]

    @classmethod
    def custom(cls, name: str) -> Permission:
        """A custom permission, by convention namespaced as ``"ns:name"``; its name in
        lower case, without surrounding spaces, as built-in names are matched.

        Example:
            >>> Permission.custom("Billing:Refund ")
            Permission.custom('billing:refund')
            >>> Permission.custom("mcp:*")
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolConfigError: permission name 'mcp:*' is a pattern, and patterns are not supported: list each permission
        """
        if not isinstance(name, str) or not name.strip():
            raise ToolConfigError(
                f"custom permission name must be a non-empty string, got {name!r}"
            )
        _refuse_pattern(name)
        return cls(_normalised(name), True)

    @classmethod
    def parse(cls, value: PermissionLike) -> Permission:
        """A permission from a :class:`Permission` or a built-in's name (``"read"``, ...).

        Example:
            >>> Permission.parse("network")
            Permission.NETWORK
        """
        if isinstance(value, Permission):
            return value
        if isinstance(value, str):
            builtin = cls._BUILTINS.get(_normalised(value))
            if builtin is not None:
                return builtin
            _refuse_pattern(value)
            names = ", ".join(cls._BUILTINS)
            raise ToolConfigError(
                f"unknown permission {value!r}: built-ins are {names}; "
                f"use Permission.custom({value!r}) for a custom one"
            )
        raise ToolDefinitionError(
            f"a permission must be a Permission or a string, got {type(value).__name__}"
        )

    @classmethod
    def parse_all(cls, values: Iterable[PermissionLike] | None) -> tuple[Permission, ...]:
        """Parse many permissions, dropping repeats and keeping their first order.

        Example:
            >>> Permission.parse_all(["read", Permission.READ, "write"])
            (Permission.READ, Permission.WRITE)
        """
        if values is None:
            return ()
        if isinstance(values, (str, Permission)):
            values = [values]
        return tuple(
            dict.fromkeys(cls.parse(v) for v in _listed(values, "Permission.parse_all() values"))
        )

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        if self.is_custom:
            return f"Permission.custom({self.name!r})"
        return f"Permission.{self.name.upper()}"


def _normalised(name: str) -> str:
    # Built-in names ignored case, custom ones did not: denied=[custom("mcp:GitHub")]
    # (or "mcp:github " from a config file) denied nothing.
    return name.strip().lower()


def _refuse_pattern(name: str) -> None:
    # Taken literally, denied=[custom("mcp:*")] matched no permission, and refused nothing.
    if "*" in name or "?" in name:
        raise ToolConfigError(
            f"permission name {name!r} is a pattern, and patterns are not supported: "
            "list each permission"
        )


PermissionLike = Permission | str
"""A :class:`Permission`, or the name of a built-in one such as ``"read"``."""

Permission._BUILTINS = {}
for _name in ("read", "write", "delete", "network", "shell", "filesystem"):
    _builtin = Permission(_name)
    Permission._BUILTINS[_name] = _builtin
    setattr(Permission, _name.upper(), _builtin)


def _listed(values: object, what: str, fix: str = "") -> Iterable[PermissionLike]:
    # A number or None failed on iteration with a bare TypeError.
    if not isinstance(values, Iterable):
        raise ToolConfigError(
            f"{what} must be a list of permissions (Permission values or names such as "
            f"'read'), got {type(values).__name__}{fix}"
        )
    if isinstance(values, Mapping):
        # Iterated, a mapping gives its keys: {"read": True, "shell": False} allowed shell.
        raise ToolConfigError(
            f"{what} must be a list of permissions, got {type(values).__name__}: list the "
            "ones that are on, [name for name, on in mapping.items() if on]"
        )
    return values


_DEFAULTS = {"allowed": "read, network", "denied": "delete, shell", "ask": "none"}


def _permission_set(values: Iterable[PermissionLike] | None, field: str) -> frozenset[Permission]:
    if values is None:
        # Read as "none", None turned the default whitelist or deny list off.
        raise ToolConfigError(
            f"PermissionConfig.{field} must be a list of permissions, got None: leave it "
            f"out for the default ({_DEFAULTS[field]}), or pass [] for none"
        )
    if not isinstance(values, (str, Permission)):
        _listed(values, f"PermissionConfig.{field}")
    return frozenset(Permission.parse_all(values))


def _as_tuple(permissions: Iterable[PermissionLike], method: str) -> tuple[PermissionLike, ...]:
    # One name is one permission, as in parse_all: tuple("shell") would be its letters.
    if isinstance(permissions, (str, Permission)):
        return (permissions,)
    if isinstance(permissions, tuple):
        return permissions
    fix = ": pass [] for a tool that declares none" if permissions is None else ""
    return tuple(_listed(permissions, f"PermissionChecker.{method}() permissions", fix))


@checks_init_keywords
@dataclass(frozen=True, init=False)
class PermissionConfig:
    """The static permission policy.

    ``allowed``, ``denied`` and ``ask`` take any iterable of :class:`Permission` or
    names like ``"read"``, and are stored as frozensets of :class:`Permission`. A
    mapping (``{"read": True}``) or None is refused with a
    :class:`~agcore_tools.error.ToolConfigError`: leave a field out for its default,
    or pass ``[]`` for none.

    Example:
        >>> cfg = PermissionConfig(allowed=["read"], denied=[], allow_unspecified=False)
        >>> Permission.READ in cfg.allowed
        True
    """

    allowed: frozenset[Permission]
    """Permissions that pass. A non-empty set is a whitelist: anything else is refused."""
    denied: frozenset[Permission]
    """Permissions that are always refused; they win over ``allowed`` and ``ask``."""
    allow_unspecified: bool
    """With an empty ``allowed``, whether other permissions pass; also whether a tool
    that declares no permissions may run. Only ``True`` or ``False``: a string such as
    ``"false"`` is refused with :class:`~agcore_tools.error.ToolConfigError`."""
    ask: frozenset[Permission]
    """Permissions that pass only with the app's approval, call by call (see
    :mod:`agcore_tools.approval`): like ``allowed`` for the other rules, but each call
    waits for an answer. ``denied`` still wins over it."""

    # An __init__ of its own (init=False): the fields are frozensets, but a type checker
    # must accept the lists every guide passes, which the generated one would refuse.
    def __init__(
        self,
        allowed: Iterable[PermissionLike] = (Permission.READ, Permission.NETWORK),
        denied: Iterable[PermissionLike] = (Permission.DELETE, Permission.SHELL),
        allow_unspecified: bool = True,
        ask: Iterable[PermissionLike] = (),
    ) -> None:
        if not isinstance(allow_unspecified, bool):
            # "false" from an env var or INI file is truthy: deny-by-default became allow.
            raise ToolConfigError(
                "PermissionConfig.allow_unspecified must be True or False, got "
                f"{type(allow_unspecified).__name__} {allow_unspecified!r}"
            )
        object.__setattr__(self, "allowed", _permission_set(allowed, "allowed"))
        object.__setattr__(self, "denied", _permission_set(denied, "denied"))
        object.__setattr__(self, "allow_unspecified", allow_unspecified)
        object.__setattr__(self, "ask", _permission_set(ask, "ask"))


class PermissionChecker:
    """Checks a tool's declared permissions against a :class:`PermissionConfig`.

    Rules, in order, for each permission: denied wins; ``ask`` passes once the app
    approves the call (:meth:`asking`); allowed passes; a non-empty allowed list is a
    whitelist; with an empty allowed list, ``allow_unspecified`` decides. A tool that
    declares no permissions passes iff ``allow_unspecified``.

    Example:
        >>> checker = PermissionChecker(PermissionConfig(allowed=[], denied=["shell"]))
        >>> checker.check("fetch", ["network"]) is None
        True
        >>> checker.is_allowed(["shell"])
        False
    """

    __slots__ = ("_cache", "_config")

    def __init__(self, config: PermissionConfig | None = None) -> None:
        if config is not None and not isinstance(config, PermissionConfig):
            # Accepted, it failed every check with a bare AttributeError.
            raise ToolConfigError(
                "PermissionChecker takes a PermissionConfig or None, got "
                f"{type(config).__name__}: use PermissionChecker(PermissionConfig(allowed=[...]))"
            )
        self._config = config if config is not None else PermissionConfig()
        # Verdicts depend only on the (immutable) config and the permission tuple,
        # so they are memoised: the check sits on every invoke's hot path.
        self._cache: dict[tuple[PermissionLike, ...], tuple[Permission | None, str] | None] = {}

    @property
    def config(self) -> PermissionConfig:
        """The rules checked. Read-only: verdicts are memoised, and a registry caches
        the definitions they allow; for other rules, give the registry a new checker
        (``registry.permission_checker = PermissionChecker(config)``).

        Example:
            >>> PermissionChecker(PermissionConfig(denied=["shell"])).config.denied
            frozenset({Permission.SHELL})
        """
        return self._config

    @config.setter
    def config(self, value: PermissionConfig) -> None:
        raise ToolConfigError(
            "PermissionChecker.config is read-only (its verdicts are memoised): assign "
            "registry.permission_checker = PermissionChecker(config) instead"
        )

    def _first_refusal(
        self, permissions: tuple[PermissionLike, ...]
    ) -> tuple[Permission | None, str] | None:
        try:
            return self._cache[permissions]
        except KeyError:
            pass
        cfg = self.config
        verdict: tuple[Permission | None, str] | None = None
        parsed = Permission.parse_all(permissions)
        if not parsed and not cfg.allow_unspecified:
            verdict = (None, "is not allowed (allow_unspecified is off)")
        for perm in parsed:
            if perm in cfg.denied:
                verdict = (perm, "is denied")
            elif perm in cfg.allowed or perm in cfg.ask:
                continue
            elif cfg.allowed:
                verdict = (perm, "is not in the allowed list")
            elif not cfg.allow_unspecified:
                verdict = (perm, "is not allowed (allow_unspecified is off)")
            else:
                continue
            break
        if len(self._cache) < 4096:
            self._cache[permissions] = verdict
        return verdict

    def check(self, tool_name: str, permissions: Iterable[PermissionLike]) -> None:
        """Return None if the tool may run, else raise :class:`PermissionDeniedError`.

        Example:
            >>> PermissionChecker().check("rm", [Permission.DELETE])
            Traceback (most recent call last):
            ...
            agcore_tools.error.PermissionDeniedError: permission denied: tool 'rm' needs 'delete', which is denied
        """
        refusal = self._first_refusal(_as_tuple(permissions, "check"))
        if refusal is not None:
            perm, rule = refusal
            raise PermissionDeniedError(tool_name, perm.name if perm else None, rule)

    def asking(self, permissions: Iterable[PermissionLike]) -> Permission | None:
        """The first of ``permissions`` in ``PermissionConfig.ask``, or None: a tool
        declaring it may run only once the app approves the call. (A denied one is
        :meth:`check`'s to refuse first.)

        Example:
            >>> checker = PermissionChecker(PermissionConfig(ask=["write"]))
            >>> checker.asking(["read", "write"])
            Permission.WRITE
            >>> checker.asking(["read"]) is None
            True
        """
        ask = self.config.ask
        if not ask:
            return None
        for perm in Permission.parse_all(permissions):
            if perm in ask:
                return perm
        return None

    def is_allowed(self, permissions: Iterable[PermissionLike]) -> bool:
        """Whether a tool declaring these permissions may run.

        Example:
            >>> PermissionChecker().is_allowed(["read"])
            True
            >>> PermissionChecker().is_allowed("shell")
            False
        """
        return self._first_refusal(_as_tuple(permissions, "is_allowed")) is None

    def __repr__(self) -> str:
        return f"PermissionChecker({self.config!r})"
