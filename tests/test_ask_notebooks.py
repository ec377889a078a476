"""%%ask end to end: real notebooks run by nbclient in real kernels, real SDKs, fake server.

The loop, view, limits, memory and usage errors are tested faster, in process, in
test_magic_inprocess.py; these are the cases that need a real kernel or the real SDKs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakellm import Fail, FakeLLM, Turn
from tests.nbrun import (
    TEST_KEY,
    anthropic_env,
    error_of,
    openai_env,
    run_cells,
    text_of,
)


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def tool_results(fake: FakeLLM, index: int) -> list[str]:
    """Return the tool results the model was sent in request `index` (either wire format)."""
    found: list[str] = []
    for msg in fake.requests[index].messages:
        if msg.get("role") == "tool":
            found.append(msg["content"])
        elif isinstance(msg.get("content"), list):
            found += [str(b.get("content")) for b in msg["content"]
                      if b.get("type") == "tool_result"]
    return found


def every_body(fake: FakeLLM) -> str:
    return json.dumps([r.body for r in fake.requests])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_multi_step_analysis_leaves_variables_for_later_cells(
    fake: FakeLLM, tmp_path: Path, provider: str
) -> None:
    fake.push(
        code("import pandas as pd\n"
             "df = pd.DataFrame({'region': list('NSN'), 'revenue': [1, 2, 3]})",
             "Loading the data."),
        code("by_region = df.groupby('region').revenue.sum()\nprint(by_region.to_dict())"),
        Turn("North has the most revenue: **4**."),
    )
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    nb = run_cells(["%%ask\nsum revenue by region", "print(by_region['N'] * 10)"], env, tmp_path)
    ask, later = nb.cells[1], nb.cells[2]
    assert error_of(ask) is None, text_of(ask)
    shown = text_of(ask)
    assert "df = pd.DataFrame" in shown and "{'N': 4, 'S': 2}" in shown
    assert "North has the most revenue: **4**." in shown
    # Three model turns of 11 input + 7 output tokens each (the fake's usage).
    assert "-test · 2 steps · 54 tokens" in shown
    assert text_of(later).strip() == "40"
    assert fake.calls() == 3
    assert "{'N': 4, 'S': 2}" in tool_results(fake, 2)[-1]
    expected_path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    assert {r.path for r in fake.requests} == {expected_path}
    # anthropic 2.x sends its key as a Bearer token too, and x-api-key only in older versions.
    headers = fake.requests[0].headers
    assert TEST_KEY in (headers.get("authorization", "") + headers.get("x-api-key", ""))


def test_a_matplotlib_plot_is_captured_as_png(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(code("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\n"
                   "plt.show()"), Turn("Plotted."))
    nb = run_cells(["%%ask\nplot it"], openai_env(fake), tmp_path)
    pngs = [o for o in nb.cells[1].outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    assert "[image/png image shown to the user, " in tool_results(fake, 1)[-1]


def test_headless_output_holds_each_steps_final_attempt_once_and_no_fixed_error(
    fake: FakeLLM, tmp_path: Path
) -> None:
    plot = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n"
    fake.push(code(plot + "print(undefined_total)"),
              code(plot + "undefined_total = 6\nprint('total', undefined_total)"),
              Turn("Plotted; the total is 6."))
    nb = run_cells(["%%ask\nplot and total"], openai_env(fake), tmp_path)
    outputs = nb.cells[1].outputs
    assert [o for o in outputs if o.output_type == "error"] == []
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) == 1
    text = text_of(nb.cells[1])
    assert "attempt 1 failed: `NameError: name 'undefined_total' is not defined`" in text
    assert "total 6" in text and "Traceback" not in text


def test_a_failed_ask_keeps_its_last_attempts_output_and_fails_the_cell(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code("print('tried')\n1/0"), code("print('tried again')\n1/0"))
    nb = run_cells(["%%ask --max-fixes 2\ndivide"], openai_env(fake), tmp_path)
    text = text_of(nb.cells[1])
    assert "attempt 1 failed" in text and "tried again" in text and "tried\n" not in text
    assert error_of(nb.cells[1]).ename == "LimitReached"


def test_context_about_a_dataframe_reaches_the_model_but_secrets_do_not(
    fake: FakeLLM, tmp_path: Path
) -> None:
    (tmp_path / "sales.csv").write_text("region,revenue\nN,1\n")
    fake.push(Turn("Revenue is 10.5."))
    secret = "sk-proj-SECRETSECRETSECRET0123456789"
    run_cells([
        "import pandas as pd\nsales = pd.DataFrame({'region': ['N', 'S'], 'revenue': [10.5, 1.0]})",
        f"my_token = '{secret}'\nnotes = 'call with key {secret}'",
        "%%ask\nhow much revenue?",
    ], openai_env(fake), tmp_path)
    prompt = fake.requests[0].messages[-1]["content"]
    for expected in ("sales", "DataFrame", "region", "revenue", "float64", "sales.csv",
                     "how much revenue?"):
        assert expected in prompt, expected
    body = every_body(fake)
    assert secret not in body and TEST_KEY not in body


def test_sys_exit_and_exit_do_not_kill_the_kernel(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(code("import sys\nsys.exit(3)"), code("exit()"), code("print('still here')"),
              Turn("ok"))
    nb = run_cells(["%%ask --max-fixes 5\nexit", "print('alive')"], openai_env(fake), tmp_path)
    assert "SystemExit" in tool_results(fake, 1)[-1]
    assert "still here" in text_of(nb.cells[1])
    assert text_of(nb.cells[2]).strip() == "alive"


def test_an_output_flood_is_trimmed_for_the_model(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(code("for i in range(200_000):\n    print(i)"), Turn("Printed."))
    run_cells(["%%ask\nflood"], openai_env(fake), tmp_path)
    sent = tool_results(fake, 1)[-1]
    assert len(sent) <= 20_000
    assert sent.startswith("0\n1\n2") and sent.rstrip().endswith("199999")


def test_a_transient_500_is_retried(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(Fail(500, times=1), code("print('after retry')"), Turn("ok"))
    nb = run_cells(["%%ask\ngo"], openai_env(fake), tmp_path)
    assert "after retry" in text_of(nb.cells[1]) and error_of(nb.cells[1]) is None
    assert fake.calls() == 3


def test_a_model_that_keeps_failing_ends_the_ask_clearly(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(Fail(503, times=20))
    nb = run_cells(["x = 7", "%%ask\ngo", "print(x)"], openai_env(fake), tmp_path)
    err = error_of(nb.cells[2])
    assert err.ename == "ModelUnavailable" and "503" in err.evalue
    assert fake.requests[0].headers["authorization"] not in json.dumps(err)
    assert text_of(nb.cells[3]).strip() == "7"


def test_unknown_model_is_a_config_error(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(Fail(404, message="model 'nope' not found"))
    nb = run_cells(["%%ask -m openai:nope\ngo"], openai_env(fake), tmp_path)
    err = error_of(nb.cells[1])
    assert err.ename == "ModelConfigError" and "nope" in err.evalue
