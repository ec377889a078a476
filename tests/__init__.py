"""Tests for jupyter-ci."""
