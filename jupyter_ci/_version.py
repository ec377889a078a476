"""Version of jupyter-ci."""

__version__ = "0.1.0"
