"""The package version, in a leaf module so that tracing can name it without
importing the package façade."""

__version__ = "0.1.0"
