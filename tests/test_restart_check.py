"""The static restart check: which names a notebook run top to bottom would miss."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.restart import RestartProblem
from jupyter_ci.kernel.restart_check import (
    AskAbove,
    RanAsk,
    asks_above,
    defined_above,
    kernel_only,
    restart_check,
    restart_notice,
    restart_problems,
    up_to_date,
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
    assert restart_notice([(2, ["orders"]), (3, ["a", "b"])]) == (
        "After a restart, step 2 would fail: `orders` is defined by no cell above it. "
        "After a restart, step 3 would fail: `a`, `b` are defined by no cell above it.")


def test_the_loops_check_says_which_names_only_a_failed_attempt_defined() -> None:
    check = restart_check(frozenset({"pd"}), transform)
    steps = [(1, "print(o.get('b', 0), pd)"), (2, "print(orders)")]
    assert check(steps, ["o = {'a': 1}\nprint(o['b'])", "def broken(:"]) == [
        RestartProblem(1, ("o",), ("o",)), RestartProblem(2, ("orders",), ())]
    assert check([(1, "o = {}\nprint(o)")], ["o = 1"]) == []


# Run All: ask 2's request was read before ask 1 (cell "ask-1") placed its steps.
RAN = {"ask-1": RanAsk("new-ask", ("monthly = sales.sum()", "growth = monthly.pct_change()"))}


def test_the_steps_an_ask_above_ran_since_the_request_was_read_are_added() -> None:
    above = ["import pandas as pd", "sales = pd.Series([1, 2])"]
    stale = asks_above([{"cell_id": "ask-1", "ask_id": None, "cells": []}])
    merged = up_to_date(above, stale, RAN)
    assert merged == [*above, *RAN["ask-1"].codes]
    assert defined_above(merged, transform) == {"pd", "sales", "monthly", "growth"}


def test_cells_of_an_ask_asked_again_since_are_replaced_by_its_new_steps() -> None:
    above = ["import pandas as pd", "old_total = 1", "x = 2"]
    replaced = asks_above([{"cell_id": "ask-1", "ask_id": "old-ask", "cells": [1]}])
    assert up_to_date(above, replaced, RAN) == ["import pandas as pd", "x = 2",
                                               *RAN["ask-1"].codes]


def test_asks_above_the_kernel_did_not_run_since_change_nothing() -> None:
    above = ["import pandas as pd", "monthly = 1"]
    # Cell by cell: the browser's record already names the kernel's last ask of that cell.
    fresh = asks_above([{"cell_id": "ask-1", "ask_id": "new-ask", "cells": [1]},
                        {"cell_id": "elsewhere", "ask_id": None, "cells": []}])
    assert up_to_date(above, fresh, RAN) == above
    # Malformed entries are left out, never trusted.
    assert asks_above([{"ask_id": "x"}, "ask-1", {"cell_id": "c", "cells": [True, 2, "3"]}]
                      ) == [AskAbove("c", None, (2,))]
    assert asks_above(None) == []
