"""jupyter_ci.client against a real server: sessions, streaming, files, tool calls, errors."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.client import (
    AsyncClient,
    Client,
    CodeInterpreterError,
    Execution,
    TokenRejected,
)
from jupyter_ci.client.formats import raise_for, tool_result
from jupyter_ci.wire.charts import BoxAndWhiskerSeries, PieSeries
from tests.fakellm import FakeLLM, Turn
from tests.nbrun import TEST_KEY, session_server_config

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLM) -> Config:
    """The extension, with OpenAI pointing at the fake model server."""
    return session_server_config(monkeypatch, {"OPENAI_API_KEY": TEST_KEY,
                                               "OPENAI_BASE_URL": fake.openai_base_url})


@pytest.fixture
def server(jp_serverapp: Any, http_server_client: Any, http_server_port: tuple[Any, int],
           jp_base_url: str) -> tuple[str, str]:
    """The live server's URL and token (http_server_client makes it listen)."""
    return (f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}",
            str(jp_serverapp.identity_provider.token))


async def test_the_sync_client_runs_code_streams_stdout_and_moves_files(
    server: tuple[str, str],
) -> None:
    url, token = server

    def use() -> dict[str, Any]:
        seen: list[tuple[float, str]] = []
        with Client(url, token) as client, client.session() as py:
            first = py.execute("x = 6 * 7\nx")
            live = py.execute("import time\nprint('a', flush=True)\ntime.sleep(1.5)\n"
                              "print('b')", on_stdout=lambda t: seen.append((time.monotonic(), t)))
            ended = time.monotonic()
            failed = py.execute("1 / 0")
            py.upload("data/in.bin", b"\x00\xffbytes")
            made = py.execute("open('out.txt', 'w').write(open('data/in.bin', 'rb').read()"
                              ".hex())")
            return {"first": first, "live": live, "seen": seen, "ended": ended,
                    "failed": failed, "made": made, "out": py.download("out.txt"),
                    "files": py.files(), "sid": py.id, "left": None}

    got = await asyncio.to_thread(use)
    assert got["first"].text == "42" and got["first"].status == "ok"
    assert "".join(t for _, t in got["seen"]) == "a\nb\n"
    assert got["ended"] - got["seen"][0][0] > 1.0, "stdout arrived only at the end"
    assert got["failed"].status == "error" and got["failed"].error["ename"] == "ZeroDivisionError"
    assert "ZeroDivisionError" in got["failed"].text
    assert got["made"].files == [{"path": "out.txt", "size": 14, "mime": "text/plain"}]
    assert got["out"] == b"\x00\xffbytes".hex().encode()
    assert {f["path"] for f in got["files"]} == {"data/in.bin", "out.txt"}
    # Leaving the with block deleted the session.
    assert await asyncio.to_thread(lambda: Client(url, token).sessions()) == []


async def test_errors_are_raised_with_the_servers_message(server: tuple[str, str]) -> None:
    url, token = server
    async with AsyncClient(url, token) as client:
        py = await client.session()
        await py.execute("import os\nos.symlink('/etc', 'etc')")
        with pytest.raises(CodeInterpreterError) as raised:
            await py.download("etc/passwd")
        assert raised.value.status == 400 and "outside" in raised.value.message
        await py.delete()
        with pytest.raises(CodeInterpreterError) as gone:
            await py.execute("1")
        assert gone.value.status == 404
    async with AsyncClient(url, "wrong-token") as stranger:
        with pytest.raises(CodeInterpreterError) as refused:
            await stranger.session()
        assert refused.value.status == 403


async def test_a_refused_upload_leaves_the_clients_connection_usable(
    server: tuple[str, str], jp_serverapp: Any
) -> None:
    url, token = server
    jp_serverapp.web_app.settings["jupyter_ci"].max_upload_bytes = 1024

    def use() -> list[int]:
        statuses = []
        with Client(url, token) as client, client.session() as py:
            # Refused on its Content-Length before the body is read; then sent chunked, with
            # no length, and refused once the body passed the limit.
            for body in (b"x" * 200_000, iter([b"x" * 50_000] * 4)):
                with pytest.raises(CodeInterpreterError) as refused:
                    raise_for(py.http.put(f"jupyter-ci/sessions/{py.id}/files/big.bin",
                                          content=body))
                statuses.append(refused.value.status)
                # The next call goes out on the same keep-alive pool and must be answered.
                assert py.execute("print('still here')").text.strip() == "still here"
        return statuses

    assert await asyncio.to_thread(use) == [413, 413]


async def test_tool_calls_of_both_providers_get_results_in_their_format_images_included(
    server: tuple[str, str],
) -> None:
    url, token = server
    async with AsyncClient(url, token) as client, await client.session() as py:
        assert py.openai_tool()["function"]["parameters"]["required"] == ["code"]
        assert py.anthropic_tool()["input_schema"]["properties"]["code"]["type"] == "string"
        openai_call = {"id": "call_1", "type": "function", "function": {
            "name": "python", "arguments": json.dumps({"code": PLOT})}}
        messages = await py.run_tool_call(openai_call)
        anthropic_call = {"type": "tool_use", "id": "toolu_1", "name": "python",
                          "input": {"code": "print(2 + 2)"}}
        block = await py.run_tool_call(anthropic_call)
    assert messages[0]["role"] == "tool" and messages[0]["tool_call_id"] == "call_1"
    assert "[image/png image shown to the user]" in messages[0]["content"]
    image = messages[1]["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,")
    assert base64.b64decode(image.split(",", 1)[1])[:4] == b"\x89PNG"
    assert block == {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": [{"type": "text", "text": "4"}], "is_error": False}


async def test_the_result_of_a_failed_run_is_an_error_for_anthropic() -> None:
    from jupyter_ci.client import Execution

    run = Execution("error", [{"output_type": "error", "ename": "NameError",
                               "evalue": "name 'x' is not defined", "traceback": []}])
    block = tool_result("anthropic", "t1", run)
    assert block["is_error"] is True and "NameError" in block["content"][0]["text"]


async def test_an_ask_through_the_async_client_yields_events_as_they_come(
    server: tuple[str, str], fake: FakeLLM
) -> None:
    url, token = server
    fake.push(Turn(tool_calls=[("run_python", {"code": "print('step ran')"})]),
              Turn("All done."))
    async with AsyncClient(url, token) as client, await client.session() as py:
        kinds = [kind async for kind, _ in py.ask("run a step")]
        assert kinds[0] == "ask_start" and kinds[-2:] == ["ask_end", "result"]
        assert kinds.index("step_start") < kinds.index("step_end")


async def test_a_missing_or_wrong_token_raises_a_clear_error(
    server: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token = server
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)

    def start(with_token: str | None) -> None:
        with Client(url, with_token) as client:
            client.session()

    for wrong in (None, "not-the-token"):
        with pytest.raises(TokenRejected) as raised:
            await asyncio.to_thread(start, wrong)
        assert raised.value.status == 403 and "missing or invalid token" in str(raised.value)
        assert "_xsrf" not in str(raised.value)
    async with AsyncClient(url, "not-the-token") as client:
        with pytest.raises(TokenRejected):
            await client.session()
    # Without a token given, the client takes the server's from JUPYTER_TOKEN.
    monkeypatch.setenv("JUPYTER_TOKEN", token)
    assert await asyncio.to_thread(lambda: Client(url).sessions()) == []


async def test_a_run_may_name_its_language_and_another_one_is_refused(
        server: tuple[str, str]) -> None:
    url, token = server
    async with AsyncClient(url, token) as client:
        py = await client.session()
        with pytest.raises(CodeInterpreterError) as refused:
            await py.execute("x = 1", language="r")
        assert (refused.value.status, refused.value.reason) == (400, "language_mismatch")
        assert "runs python, not r" in refused.value.message
        [ran] = await py.execute_cells(["'x' in dir()"], language="py")
        assert ran.text == "False"

    def sync() -> str | None:
        with Client(url, token) as again:
            return again.session(py.id).execute("6 * 7", language="Python").text

    assert await asyncio.to_thread(sync) == "42"


#: E2B's box-and-whisker and pie cases, as its own tests run them (python/tests/charts/).
E2B_CHARTS = """\
import matplotlib.pyplot as plt
data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87],
        'Class C': [75, 82, 88, 79, 86]}
fig, ax = plt.subplots(figsize=(10, 6))
ax.set_title('Exam Scores Distribution')
ax.set_xlabel('Class')
ax.set_ylabel('Score (points)')
ax.boxplot(data.values(), tick_labels=data.keys(), patch_artist=True)
plt.show()
fig, ax = plt.subplots(figsize=(8, 8))
ax.pie([90, 10], labels=['No', 'No, in blue'], autopct='%1.1f%%', startangle=90)
plt.title('Will I wake up early tomorrow?')
plt.show()
"""


async def test_a_results_chart_reads_e2bs_box_plot_and_pie(server: tuple[str, str]) -> None:
    url, token = server
    async with AsyncClient(url, token) as client:
        py = await client.session()
        run = await py.execute(E2B_CHARTS)
    boxes, pie = (result.chart for result in run.results)
    assert boxes is not None and pie is not None, run.summary
    [axes] = boxes.axes
    assert (axes.type, axes.title, axes.y.unit) == ("box_and_whisker", "Exam Scores "
                                                    "Distribution", "points")
    assert axes.x.tick_labels == ("Class A", "Class B", "Class C")
    series = axes.series[0]
    assert isinstance(series, BoxAndWhiskerSeries)
    assert [(b.label, b.min, b.first_quartile, b.median, b.third_quartile, b.max, b.outliers)
            for b in series.boxes] == [("Class A", 78, 85, 88, 90, 92, ()),
                                       ("Class B", 84, 84.75, 88, 90.5, 95, (76,)),
                                       ("Class C", 75, 79, 82, 86, 88, ())]
    wedges = pie.axes[0].series[0]
    assert isinstance(wedges, PieSeries) and pie.axes[0].title == "Will I wake up early tomorrow?"
    assert (wedges.labels, wedges.fractions, wedges.radius) == (
        ("No", "No, in blue"), (0.9, 0.1), (1, 1))
    assert Execution.from_json(run.to_json()).results[0].chart == boxes
