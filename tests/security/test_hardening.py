"""The server process's hardening (non-dumpable), tested in-process where it is harmless."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from jupyter_ci.server import hardening

LOG = logging.getLogger("test-hardening")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_make_non_dumpable_in_a_child_process() -> None:
    # In a child: this test process must stay dumpable for the tests after it.
    code = ("import logging, os; from jupyter_ci.server import hardening as h\n"
            "before = h.is_dumpable(); done = h.make_non_dumpable(logging.getLogger())\n"
            "print(before, done, h.is_dumpable(), os.stat('/proc/self/environ').st_uid)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True", "False", "0"]


def test_hardening_is_a_logged_no_op_elsewhere(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(hardening.sys, "platform", "darwin")
    assert hardening.make_non_dumpable(LOG) is False
    assert hardening.is_dumpable() is None
    assert "no PR_SET_DUMPABLE on darwin" in caplog.text
