"""The package's version (the HTTP app and the package itself report it)."""

__version__ = "0.1.0"
