"""Issue 32.3 in a real browser: the panel follows the newest ask as a chat does (and leaves
a user who scrolled up where they are), and the key form folds away once a key is set."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.fakellm import FakeLLM, Turn
from tests.ui.lab import WAIT_MS, Lab, Notebook

LOAD = "%load_ext jupyter_ci"
#: An answer taller than the panel: 60 paragraphs.
TALL = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(1, 61))
#: A step that runs until the test creates the file `go` beside the notebook.
GATED = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.1)\nprint('gate open')"


def code(src: str, text: str = "") -> Turn:
    return Turn(text, tool_calls=[("run_python", {"code": src})])


def scroll(lab: Lab) -> dict[str, Any]:
    """Return the conversation list's scroll metrics."""
    metrics: dict[str, Any] = lab.panel.part("conversation").evaluate(
        "e => ({top: e.scrollTop, height: e.scrollHeight, view: e.clientHeight})")
    return metrics


def at_end(lab: Lab) -> bool:
    """Tell whether the conversation shows its end (within 2 px)."""
    m = scroll(lab)
    return bool(m["height"] - m["view"] - m["top"] <= 2)


def wait_at_end(lab: Lab) -> None:
    """Wait until the conversation shows its end."""
    lab.panel.part("conversation").evaluate(
        """e => new Promise((ok, fail) => {
             const t0 = Date.now();
             const look = () => e.scrollHeight - e.clientHeight - e.scrollTop <= 2 ? ok()
               : Date.now() - t0 > 60000 ? fail(new Error('not at the end')) : setTimeout(look, 50);
             look();
           })""")


def entry_done(lab: Lab, index: int, text: str) -> None:
    """Wait until the panel's ask `index` is done and shows `text` in its answer."""
    entry = lab.panel.part("ask").nth(index)
    expect(entry).to_have_attribute("data-jupyter-ci-status", "done", timeout=WAIT_MS)
    expect(entry.locator('[data-jupyter-ci="answer"]')).to_contain_text(text, timeout=WAIT_MS)


def ask_and_wait(lab: Lab, nb: Notebook, prompt: str, index: int, text: str) -> None:
    """Ask in the panel; wait for the answer and the kernel."""
    lab.panel.ask(prompt)
    entry_done(lab, index, text)
    nb.wait_kernel_idle()


def test_the_panel_follows_the_newest_ask_but_not_against_a_user_who_scrolled_up(
    lab: Lab, fake: FakeLLM
) -> None:
    nb = lab.open_notebook("follow", [LOAD])
    gate = nb.path.parent / "go"
    gate.unlink(missing_ok=True)
    lab.panel.open()
    # The server has a key from its environment: the key form is folded to one line.
    expect(lab.panel.part("keys")).not_to_have_attribute("open", "")
    expect(lab.panel.part("keys-held")).to_contain_text("OpenAI configured")
    # A first tall answer: the panel scrolls, and stays at its end.
    fake.push(Turn(TALL))
    ask_and_wait(lab, nb, "write a lot", 0, "Paragraph 60")
    m = scroll(lab)
    assert m["height"] > 2 * m["view"], m  # it really scrolls
    wait_at_end(lab)
    # A second ask streams in: its step, then a tall answer; the view follows it.
    fake.push(code("print('step one')"), Turn(TALL.replace("Paragraph", "Second")))
    ask_and_wait(lab, nb, "write more", 1, "Second 60")
    wait_at_end(lab)
    lab.screenshot("panel-follows-newest")
    # A third ask: its step waits for the gate. The view follows the new ask; then the
    # user scrolls up to read, and the answer streaming in afterwards leaves them there.
    fake.push(code(GATED), Turn(TALL.replace("Paragraph", "Third")))
    lab.panel.ask("wait for the gate")
    running = lab.panel.part("ask").nth(2)
    expect(running.locator('[data-jupyter-ci="step"]')).to_have_count(1, timeout=WAIT_MS)
    wait_at_end(lab)
    lab.panel.part("conversation").hover()
    lab.page.mouse.wheel(0, -1500)
    lab.page.wait_for_function(
        "() => { const e = document.querySelector('[data-jupyter-ci=\"conversation\"]');"
        " return e.scrollHeight - e.clientHeight - e.scrollTop > 1000; }", timeout=WAIT_MS)
    read_at = scroll(lab)["top"]
    gate.write_text("")
    entry_done(lab, 2, "Third 60")
    after = scroll(lab)
    assert after["height"] > read_at + 2 * after["view"]  # the answer grew below them
    assert abs(after["top"] - read_at) <= 2, (read_at, after)
    assert not at_end(lab)
    lab.screenshot("panel-left-where-scrolled")
    nb.wait_kernel_idle()
    # Sending another ask brings the view back to the newest.
    fake.push(Turn("Short and last."))
    ask_and_wait(lab, nb, "one more", 3, "Short and last.")
    wait_at_end(lab)
    gate.unlink()


PASTED = "sk-pasted-FOLD-the-form-8642"


def test_the_key_form_folds_once_a_key_is_set_and_opens_to_change_or_remove_it(
    bare_lab: Lab, fake: FakeLLM
) -> None:
    lab = bare_lab
    responses = lab.response_bodies()
    nb = lab.open_notebook("fold-keys", ["x = 1"])
    lab.panel.open()
    form, summary = lab.panel.part("keys"), lab.panel.part("keys-summary")
    # No key: open, the fields in view.
    expect(form).to_have_attribute("open", "", timeout=WAIT_MS)
    expect(lab.panel.part("key-input")).to_be_visible()
    lab.panel.part("key-input").fill(PASTED)
    lab.panel.part("key-url").fill(fake.openai_base_url)
    lab.panel.part("key-save").click()
    # Saved and checked: folded to one line that says so.
    expect(form).not_to_have_attribute("open", "", timeout=WAIT_MS)
    expect(lab.panel.part("keys-held")).to_contain_text("OpenAI configured")
    expect(lab.panel.part("key-input")).to_be_hidden()
    expect(lab.panel.part("key-status")).to_contain_text("OpenAI key saved")
    lab.screenshot("keys-folded")
    # A reload: the server holds the key, the form stays folded.
    nb = lab.reload(nb)
    lab.panel.open()
    expect(lab.panel.part("keys-held")).to_contain_text("OpenAI configured", timeout=WAIT_MS)
    expect(form).not_to_have_attribute("open", "")
    # The one line opens it again (to change or remove a key), and folds it.
    summary.click()
    expect(form).to_have_attribute("open", "")
    expect(lab.panel.part("key-input")).to_be_visible()
    expect(lab.panel.part("keys-held")).to_have_count(0)
    lab.screenshot("keys-reopened")
    summary.click()
    expect(form).not_to_have_attribute("open", "")
    expect(lab.panel.part("key-input")).to_be_hidden()
    # Opened again to remove the key: the server forgets it, and the form stays open.
    summary.click()
    lab.panel.part("key-remove").click()
    expect(lab.panel.part("key-status")).to_contain_text(
        "OpenAI key and base URL removed from the server", timeout=WAIT_MS)
    expect(lab.panel.part("key-provider").first).to_have_attribute(
        "data-jupyter-ci-configured", "false")
    expect(form).to_have_attribute("open", "")
    expect(lab.panel.part("keys-held")).to_have_count(0)
    lab.screenshot("keys-removed")
    nb = lab.reload(nb)
    lab.panel.open()
    expect(form).to_have_attribute("open", "", timeout=WAIT_MS)
    # The key never came back to the page.
    assert PASTED not in lab.page.content()
    assert responses and not [r for r in responses if PASTED in r]
