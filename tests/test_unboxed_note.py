"""`%%ask` in a kernel that is not boxed says so once per kernel, in the cell and the panel."""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_ci.kernel.magics import UNBOXED_NOTE
from jupyter_ci.wire.names import BOXED_VARIABLE
from tests.fakellm import FakeLLM, Turn
from tests.kernelrun import Kernel
from tests.nbrun import openai_env

FRONTEND = {"jupyter_ci_frontend": {"protocol": 2, "generated": []}, "cellId": "ask-cell-1"}


def notes(data: list[dict[str, object]]) -> list[object]:
    return [d["message"] for d in data if d["type"] == "warning"]


def test_an_unboxed_kernels_first_ask_says_it_once_and_how_to_box_it(
    fake: FakeLLM, tmp_path: Path
) -> None:
    kernel = Kernel(openai_env(fake), str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(Turn("First."), Turn("Second."))
        first = kernel.execute("%%ask\nsay first", FRONTEND)
        second = kernel.execute("%%ask\nsay second", FRONTEND)
    finally:
        kernel.close()
    assert notes(first.comm_data(unboxed_note=True)) == [UNBOXED_NOTE]
    assert notes(second.comm_data(unboxed_note=True)) == []
    assert "all your rights" in UNBOXED_NOTE and "Run this notebook boxed" in UNBOXED_NOTE
    # In the cell's log: above "Asking…", whose line keeps counting the model's seconds.
    shown = [m["content"]["data"]["text/plain"] for m in first.of_type("update_display_data",
                                                                       "display_data")
             if UNBOXED_NOTE in m["content"]["data"].get("text/plain", "")]
    assert shown and shown[-1].index(UNBOXED_NOTE) < shown[-1].index("Asking")


def test_a_boxed_kernel_says_nothing(fake: FakeLLM, tmp_path: Path) -> None:
    # The provisioner sets this variable in every box (server/sandbox/provisioner.py).
    kernel = Kernel({**openai_env(fake), BOXED_VARIABLE: "notebook"}, str(tmp_path))
    try:
        kernel.execute("%load_ext jupyter_ci")
        fake.push(Turn("Done."))
        run = kernel.execute("%%ask\nsay done", FRONTEND)
    finally:
        kernel.close()
    assert notes(run.comm_data(unboxed_note=True)) == []
    assert UNBOXED_NOTE not in json.dumps([m["content"] for m in run.iopub])
