"""The package's version, in a leaf module so any module can read it without importing
the package's ``__init__`` (and everything it re-exports)."""

__version__ = "0.2.0"
