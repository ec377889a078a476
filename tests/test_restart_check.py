"""The static restart check: which names a notebook run top to bottom would miss."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.kernel.restart_check import (
    defined_above,
    describe,
    kernel_only,
    restart_problems,
)

transform = InteractiveShell.instance().transform_cell


def test_cells_above_with_magics_and_python_cell_magics_define_their_names() -> None:
    above = defined_above(["%matplotlib inline\nimport pandas as pd", "%%time\norders = 1",
                           "!ls\nfor i, row in enumerate([]):\n    pass",
                           "def load(path):\n    return path", "class Model: ..."], transform)
    assert above == {"pd", "orders", "i", "row", "load", "path", "Model"}


def test_a_cell_above_that_star_imports_or_does_not_parse_makes_the_answer_unknown() -> None:
    assert defined_above(["from math import *"], transform) is None
    assert defined_above(["def broken(:"], transform) is None


def test_steps_that_read_names_no_cell_defines_are_named_in_order() -> None:
    above = frozenset({"pd"})
    steps = [(1, "print(orders.sum())"),
             (2, "orders = orders.dropna()"),  # reads the old orders before binding it
             (3, "orders = pd.read_csv('o.csv')\nprint(orders)"),
             (4, "totals = {k: v for k, v in orders.items()}\nfor r in range(2):\n    last = r"
                 "\nprint(last, totals, len)"),
             (5, "def f(a):\n    return a + missing\nf(1)")]
    assert restart_problems(above, steps, transform) == [
        (1, ["orders"]), (2, ["orders"]), (5, ["missing"])]


def test_a_star_import_in_a_step_stops_the_check_there() -> None:
    steps = [(1, "x = y"), (2, "from os.path import *\nprint(join)"), (3, "print(z)")]
    assert restart_problems(frozenset(), steps, transform) == [(1, ["y"])]


def test_kernel_only_names_leave_out_hidden_private_and_builtin_names() -> None:
    namespace = ["orders", "pd", "_", "_secret", "In", "get_ipython", "print", "np"]
    assert kernel_only(namespace, frozenset({"pd"}), hidden=["np"]) == ["orders"]


def test_the_warning_names_each_step_and_its_missing_names() -> None:
    assert describe([(2, ["orders"]), (3, ["a", "b"])]) == (
        "After a restart, step 2 would fail: `orders` is defined by no cell above it. "
        "After a restart, step 3 would fail: `a`, `b` are defined by no cell above it.")
