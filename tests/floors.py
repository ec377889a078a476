"""The tests scripts/test.sh runs again on the oldest Jupyter stack the package declares.

`python -m tests.floors` prints their paths. They are the kernel side (the magic, its cells,
history, headless runs: IPython and ipykernel) and the browser (JupyterLab, jupyter_server);
tests/floors.txt pins the versions, tests/test_packaging.py keeps them the declared floors.
"""

from __future__ import annotations

from pathlib import Path

PATHS = (
    "tests/ui", "tests/security/browser", "tests/test_history.py", "tests/test_executor.py",
    "tests/test_magic_inprocess.py", "tests/test_kernel_protocol.py",
    "tests/test_approval_kernel.py", "tests/test_restart_record.py",
    "tests/test_show_context.py", "tests/test_structured.py", "tests/test_ask_notebooks.py",
    "tests/test_headless_answers.py", "tests/test_headless_pin.py",
    "tests/test_notebook_run.py", "tests/test_example_notebook.py",
    "tests/test_service_kernel.py", "tests/security/test_model_code_marks.py",
    "tests/security/test_step_outputs_inline.py", "tests/security/test_signed_records.py",
)
#: Left out there: they need Jupyter's real-time collaboration (jupyter-collaboration 5 needs
#: JupyterLab 4.6), which the floors' stack cannot have; its door is the page path there,
#: which tests/ui/test_notebook_run.py and tests/test_notebook_run.py test on both stacks.
LEFT_OUT = ("tests/ui/test_notebook_door.py",)
#: The versions they run on (pip's constraints), beside this file.
CONSTRAINTS = Path(__file__).with_name("floors.txt")

if __name__ == "__main__":
    # Sorted, each directory's paths are side by side: pytest 9.1 loses a package's conftest
    # fixtures for a path given after one from its parent directory that follows another of
    # its own (pytest-dev/pytest#14964, #14971: "fixture 'live_server' not found").
    print(" ".join([*sorted(PATHS), *(f"--ignore={path}" for path in LEFT_OUT)]))
