"""Shared pytest setup."""

pytest_plugins = ["pytest_jupyter.jupyter_server"]
