"""The model sees its charts, display updates and the files it writes (issue 10, parts 1-3).

Notebooks run by nbclient in real kernels, real SDKs, the fake model server; the checks read
the requests the fake recorded, in each provider's wire format.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from tests.fakellm import FakeLLM, Turn
from tests.fakellm_wire import image_parts
from tests.nbrun import anthropic_env, error_of, openai_env, run_cells, text_of

BIG_PLOT = ("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(16, 12), dpi=100)\n"
            "plt.plot([1, 3, 2])\nplt.title('sales')\nplt.show()")
SMALL_PLOT = "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.show()"
NOT_ACCEPTED = "[image not shown: this model does not accept images]"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def tool_texts(body: dict[str, Any]) -> list[str]:
    """Return the text of every tool result in a request, in either wire format."""
    texts: list[str] = []
    for msg in body.get("messages", []):
        if msg.get("role") == "tool":
            texts.append(msg["content"])
        elif isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if block.get("type") != "tool_result":
                    continue
                content = block.get("content")
                texts.append(content if isinstance(content, str) else "\n".join(
                    part["text"] for part in content if part["type"] == "text"))
    return texts


def decoded_size(data: str) -> tuple[int, int]:
    with PILImage.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.size


def answer_shown(cell: Any) -> tuple[str, str]:
    """Return the Markdown source and the HTML of the last Markdown display of a cell."""
    for out in reversed(cell.outputs):
        data = out.get("data", {})
        if "jp-ci-markdown" in data.get("text/html", ""):
            return data["text/plain"], data["text/html"]
    raise AssertionError(text_of(cell))


def test_openai_gets_a_downscaled_plot_in_a_user_message_after_the_tool_messages(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code(BIG_PLOT), Turn("The line peaks at 3."))
    nb = run_cells(["%%ask\nplot it"], openai_env(fake), tmp_path)
    assert error_of(nb.cells[1]) is None, text_of(nb.cells[1])
    messages = fake.requests[1].messages
    tool = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    assert "[image/png image shown to the user, 1024x" in messages[tool]["content"]
    assert "attached for you to see]" in messages[tool]["content"]
    follow = messages[tool + 1]
    assert follow["role"] == "user" and [p["type"] for p in follow["content"]] == [
        "text", "image_url"]
    url = follow["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert max(decoded_size(url.split(",", 1)[1])) == 1024


def test_anthropic_gets_a_downscaled_plot_inside_the_tool_result(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code(BIG_PLOT), Turn("The line peaks at 3."))
    nb = run_cells(["%%ask\nplot it"], anthropic_env(fake), tmp_path)
    assert error_of(nb.cells[1]) is None, text_of(nb.cells[1])
    results = [b for m in fake.requests[1].messages if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 1
    parts = results[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image"]
    source = parts[1]["source"]
    assert source["type"] == "base64" and source["media_type"] == "image/png"
    assert max(decoded_size(source["data"])) == 1024


def test_a_server_that_refuses_images_is_asked_again_without_them_and_never_sent_more(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.text_only = True
    fake.push(code(SMALL_PLOT), code(SMALL_PLOT), Turn("Two plots."),
              code(SMALL_PLOT), Turn("A third."))
    nb = run_cells(["%%ask\nplot twice", "%%ask\nonce more"], openai_env(fake, "openai:llama3"),
                   tmp_path)
    for cell in nb.cells[1:]:
        assert error_of(cell) is None, text_of(cell)
    assert "Two plots." in text_of(nb.cells[1]) and "A third." in text_of(nb.cells[2])
    bodies = [r.body for r in fake.requests]
    # The first request with an image was refused with a 400; every other one had none.
    assert [bool(image_parts(b)) for b in bodies] == [False, True, False, False, False, False]
    assert NOT_ACCEPTED in tool_texts(bodies[2])[-1]
    assert all(NOT_ACCEPTED in text for text in tool_texts(bodies[3]))
    assert NOT_ACCEPTED in tool_texts(bodies[5])[-1]


def test_the_image_cap_leaves_later_images_out_and_says_so(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code(SMALL_PLOT), code(SMALL_PLOT), Turn("Two plots."))
    nb = run_cells(["%config JupyterCI.max_images = 1", "%%ask\nplot twice"],
                   anthropic_env(fake), tmp_path)
    assert error_of(nb.cells[2]) is None, text_of(nb.cells[2])
    last = fake.requests[-1].body
    assert len(image_parts(last)) == 1
    first, second = tool_texts(last)
    assert "attached for you to see]" in first
    assert ("[image/png image shown to the user; not sent to you: this ask's limit of 1 "
            "image is reached]") in second


def test_vision_off_sends_no_image_and_says_so(fake: FakeLLM, tmp_path: Path) -> None:
    fake.push(code(SMALL_PLOT), Turn("Plotted."))
    run_cells(["%config JupyterCI.vision = 'off'", "%%ask\nplot"], openai_env(fake), tmp_path)
    assert not any(image_parts(r.body) for r in fake.requests)
    said = tool_texts(fake.requests[1].body)[-1].splitlines()
    assert said[0] == "[image/png image shown to the user; not sent to you: vision is off]"
    # No picture, but the plot's numbers (its chart data) still reach the model.
    assert said[1] == "[Chart data]" and said[-1].startswith("- line (3 points): (0, 3)")


def test_an_update_of_an_earlier_display_reaches_the_model_and_the_notebook(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code("h.update('after')\nstep = display('in step 1', display_id=True)"),
              code("step.update('step 1, updated in step 2')\nprint('done')"),
              Turn("Updated."))
    nb = run_cells(["h = display('before', display_id=True)", "%%ask\nupdate it"],
                   openai_env(fake), tmp_path)
    assert error_of(nb.cells[2]) is None, text_of(nb.cells[2])
    first = tool_texts(fake.requests[1].body)[-1]
    assert first == ("'in step 1'\n[A display shown earlier was updated; it now shows:]\n"
                     "'after'")
    second = tool_texts(fake.requests[2].body)[-1]
    assert second == ("done\n[A display shown earlier was updated; it now shows:]\n"
                      "'step 1, updated in step 2'")
    # The user's own cell shows the update too (it went to the frontend, not swallowed).
    assert text_of(nb.cells[1]).strip() == "'after'"


def test_a_created_file_is_listed_with_its_size_and_linked_in_the_answer(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.push(code("import pathlib\npathlib.Path('out').mkdir()\n"
                   "pathlib.Path('out/sales.csv').write_text('region,total\\nN,4\\n')\n"
                   "pathlib.Path('notes on it.txt').write_text('ok')\n"
                   "pathlib.Path('.cache').mkdir()\n_ = pathlib.Path('.cache/x').write_text('x')"),
              Turn("Wrote out/sales.csv and `notes on it.txt`; report.pdf was not made."))
    nb = run_cells(["%%ask\nsave totals"], openai_env(fake), tmp_path)
    assert error_of(nb.cells[1]) is None, text_of(nb.cells[1])
    listed = tool_texts(fake.requests[1].body)[-1]
    assert listed == ("[Files created or changed in the working directory (mention them by "
                      "these relative paths):]\n- notes on it.txt (2 B, text/plain)\n"
                      "- out/sales.csv (17 B, text/csv)")
    source, html = answer_shown(nb.cells[1])
    assert source == ("Wrote [out/sales.csv](out/sales.csv) and [`notes on it.txt`]"
                      "(notes%20on%20it.txt); report.pdf was not made.")
    assert '<a href="out/sales.csv"' in html and '<a href="notes%20on%20it.txt"' in html


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_sandbox_link_is_rewritten_when_the_file_exists_and_left_as_text_when_not(
    fake: FakeLLM, tmp_path: Path, provider: str
) -> None:
    fake.push(code("open('x.csv', 'w').write('a,b\\n1,2\\n')"),
              Turn("Download [the table](sandbox:/mnt/data/x.csv) or /mnt/data/x.csv; "
                   "[the chart](sandbox:/mnt/data/chart.png) was not saved."))
    env = openai_env(fake) if provider == "openai" else anthropic_env(fake)
    nb = run_cells(["%%ask\nsave it"], env, tmp_path)
    source, html = answer_shown(nb.cells[1])
    assert source == ("Download [the table](x.csv) or [x.csv](x.csv); the chart was not "
                      "saved.")
    assert html.count('<a href="x.csv"') == 2 and "sandbox" not in html


# Fast checks of the pieces, in process.


def _png(size: tuple[int, int], mode: str = "RGBA", noise: bool = False) -> str:
    import random

    from PIL import ImageFilter

    image = PILImage.new(mode, size, "white")
    if noise:  # like a photo: smooth, with thousands of colours, where JPEG wins
        rng = random.Random(1)
        image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256))
                       for _ in range(size[0] * size[1])])
        image = image.filter(ImageFilter.GaussianBlur(2))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_images_are_downscaled_flattened_and_encoded_compactly() -> None:
    from jupyter_ci.agent.images import shrink

    chart = shrink("image/png", _png((3000, 600)), 1024)
    assert chart is not None and (chart.mime, chart.width, chart.height) == (
        "image/png", 1024, 205)
    with PILImage.open(io.BytesIO(base64.b64decode(chart.data))) as opened:
        assert opened.size == (1024, 205) and opened.mode == "P"
    photo = shrink("image/png", _png((300, 200), "RGB", noise=True), 1024)
    assert photo is not None and photo.mime == "image/jpeg" and photo.width == 300
    assert shrink("image/png", "bm90IGFuIGltYWdl", 1024) is None  # "not an image"


def test_image_token_estimates_follow_the_providers_published_rules() -> None:
    from jupyter_ci.agent.images import image_tokens

    assert image_tokens(1024, 768) == 1049  # Anthropic's w*h/750 beats OpenAI's 4 tiles (765)
    assert image_tokens(100, 100) == 255  # OpenAI's floor: 85 + one 512-px tile
    assert image_tokens(4000, 100) == 765  # Anthropic 534; OpenAI 4 tiles after fitting 2048


def test_the_picker_keeps_to_the_budget_and_sends_small_svgs_as_text() -> None:
    from jupyter_ci.agent.images import ImagePicker, Vision

    outputs = [{"output_type": "display_data", "data": {"image/png": _png((800, 600))}},
               {"output_type": "display_data", "data": {"image/svg+xml": "<svg>s</svg>"}},
               {"output_type": "display_data", "data": {"image/svg+xml": "<svg>" + "x" * 5000}}]
    picked = ImagePicker(Vision(True, 10, 1024)).pick(outputs, tokens_left=100)
    assert picked.images == []
    assert picked.notes[0].endswith("not sent to you: it would not fit in the ask's token "
                                    "budget]")
    assert picked.notes[1] == "[image/svg+xml image shown to the user; its SVG source:]\n" \
                              "<svg>s</svg>"
    assert "an SVG too long to send as text" in picked.notes[2]


def test_auto_vision_is_off_only_for_models_known_to_take_text_only() -> None:
    from jupyter_ci.models.resolve import vision_enabled
    from jupyter_ci.models.scripted import ScriptedModel
    from jupyter_ci.providers import model_sees_images

    on = ["openai:gpt-4o", "openai:gpt-4.1-mini", "openai:gpt-5", "openai:o3", "openai:o4-mini",
          "openai:gpt-4-turbo", "openai:llama3.2-vision", "anthropic:claude-3-haiku-20240307",
          "anthropic:claude-sonnet-4-5"]
    off = ["openai:gpt-3.5-turbo", "openai:gpt-4", "openai:gpt-4-0613", "openai:o3-mini",
           "anthropic:claude-2.1", "anthropic:claude-instant-1.2"]
    assert all(model_sees_images(m) for m in on)
    assert not any(model_sees_images(m) for m in off)
    text_only, seeing = ScriptedModel([], id="openai:gpt-3.5-turbo"), ScriptedModel(
        [], id="openai:gpt-4o")
    assert not vision_enabled("auto", text_only) and vision_enabled("on", text_only)
    assert vision_enabled("auto", seeing) and not vision_enabled("off", seeing)


def test_without_images_the_openai_wire_says_they_were_not_shown() -> None:
    from jupyter_ci.agent.types import Image, Message, ToolCall, ToolResult
    from jupyter_ci.models.openai import NO_IMAGES_NOTE, to_wire

    history = (Message("user", "plot"),
               Message("assistant", "", (ToolCall("c1", "run_python", '{"code": "p()"}'),)),
               Message.tool("c1", ToolResult("ok", "shown", (Image("image/png", "AAAA"),))))
    assert [m["role"] for m in to_wire("", history)] == ["user", "assistant", "tool", "user"]
    without = to_wire("", history, images=False)
    assert [m["role"] for m in without] == ["user", "assistant", "tool"]
    assert without[-1]["content"] == f"shown\n{NO_IMAGES_NOTE}"


def test_links_are_relative_inside_the_folder_and_code_and_urls_are_left_alone(
    tmp_path: Path,
) -> None:
    from jupyter_ci.kernel.answer_links import link_files
    from jupyter_ci.kernel.safe_markdown import to_html

    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "a.csv").write_text("1")
    (tmp_path / "secret.txt").write_text("s")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    answer = ("a.csv, ../secret.txt, link.txt, [x](javascript:alert(1)) "
              "https://example.com/a.csv [w](http://e.org/a.csv) sandbox:/mnt/data/gone.csv\n"
              "```\nsave('a.csv')\n```\n")
    linked = link_files(answer, folder)
    assert linked == ("[a.csv](a.csv), ../secret.txt, link.txt, [x](javascript:alert(1)) "
                      "https://example.com/a.csv [w](http://e.org/a.csv) "
                      "sandbox:/mnt/data/gone.csv\n```\nsave('a.csv')\n```\n")
    html = to_html(linked)
    assert '<a href="a.csv"' in html and "javascript:" not in html


def test_snapshots_skip_hidden_folders_and_caches_and_stop_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_ci import workdir

    for rel in ("a.txt", ".hidden.txt", "d/b.txt", ".git/c", "__pycache__/m.pyc",
                ".ipynb_checkpoints/n.ipynb", "node_modules/p/q.js"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert sorted(workdir.snapshot(tmp_path)) == [".hidden.txt", "a.txt", "d/b.txt"]
    monkeypatch.setattr(workdir, "MAX_SCANNED", 2)
    assert len(workdir.snapshot(tmp_path)) < 3


def test_an_update_of_a_display_this_run_cleared_is_not_reported() -> None:
    from jupyter_ci.agent.outputs import OutputList

    outputs = OutputList()
    shown = {"data": {"text/plain": "1"}, "metadata": {}, "transient": {"display_id": "d"}}
    outputs.apply("display_data", shown)
    outputs.apply("clear_output", {"wait": False})
    outputs.apply("update_display_data", {**shown, "data": {"text/plain": "2"}})
    outputs.apply("update_display_data", {"data": {"text/plain": "3"}, "metadata": {},
                                          "transient": {"display_id": "earlier"}})
    assert outputs.merged() == []
    assert outputs.updated_elsewhere() == [
        {"output_type": "display_data", "data": {"text/plain": "3"}, "metadata": {}}]
