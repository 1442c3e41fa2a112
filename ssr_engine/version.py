"""The package version, apart from the package face so that the build can record it."""

__version__ = "0.1.0"
