"""Missing packages, the pure part: names, policy, and the loop's install step and retry."""

from __future__ import annotations

import importlib
import json

import pytest

from jupyter_ci.agent.install import (
    Install,
    InstallPolicy,
    Refuse,
    checked_install,
    decide,
    missing_module,
    package_for,
    question,
    resolve_mode,
    yes,
)
from jupyter_ci.agent.loop import AskLoop, CallModel, ConfirmInstall, Finish, Limits, RunCode
from jupyter_ci.agent.types import CodeResult, ErrorInfo, ModelReply, ToolCall
from jupyter_ci.kernel.executor import missing_module_name

ALWAYS = InstallPolicy("always")


def call(code: str, call_id: str = "c1") -> ModelReply:
    return ModelReply(tool_calls=(ToolCall(call_id, "run_python", json.dumps({"code": code})),))


def no_module(name: str) -> CodeResult:
    return CodeResult("error", [], 0.01, 3, ErrorInfo(
        "ModuleNotFoundError", f"No module named '{name}'", ("----> 1 import x",), name))


def printed(text: str) -> CodeResult:
    return CodeResult("ok", [{"output_type": "stream", "name": "stdout", "text": text}], 0.1, 4)


@pytest.mark.parametrize(("module", "package"), [
    ("sklearn", "scikit-learn"), ("cv2", "opencv-python"), ("PIL", "pillow"),
    ("yaml", "pyyaml"), ("bs4", "beautifulsoup4"), ("skimage", "scikit-image"),
    ("dateutil", "python-dateutil"), ("dotenv", "python-dotenv"), ("Crypto", "pycryptodome"),
    ("seaborn", "seaborn"), ("jci_demo_pkg", "jci_demo_pkg"),
])
def test_import_names_map_to_pip_packages(module: str, package: str) -> None:
    assert package_for(module) == package
    assert decide(module, ALWAYS, {}) == Install(module, package, ask=False)


@pytest.mark.parametrize("name", [
    "--index-url", "-e", "x y", "{evil}", "$HOME", "https://evil.example/p", "p;rm",
    "pkg==1.0", "pkg[extra]", "/tmp/pkg", "a\nb", "", "ünïcode", "_private", "google",
])
def test_names_that_are_not_plain_package_names_are_refused(name: str) -> None:
    verdict = decide(name, ALWAYS, {})
    assert isinstance(verdict, Refuse), name
    assert "not a package name" in verdict.note and "Do without it" in verdict.note


def test_submodules_relative_imports_and_the_stdlib_are_not_installed() -> None:
    # The parent imported, so a missing submodule is no missing package.
    assert decide("sklearn.externals", ALWAYS, {}) is None
    assert decide(".helpers", ALWAYS, {}) is None
    stdlib = decide("tkinter", ALWAYS, {})
    assert isinstance(stdlib, Refuse) and "standard library" in stdlib.note


def test_the_missing_module_is_read_from_the_error() -> None:
    assert missing_module(no_module("seaborn").error) == "seaborn"
    # Over the wire (REST) only the message is known.
    assert missing_module(ErrorInfo("ModuleNotFoundError", "No module named 'cv2'")) == "cv2"
    assert missing_module(ErrorInfo("ModuleNotFoundError", "something else")) is None
    assert missing_module(ErrorInfo("NameError", "No module named 'x'")) is None
    assert missing_module(None) is None


def test_the_kernel_reads_the_name_also_through_a_reraised_import_error() -> None:
    try:
        importlib.import_module("jci_surely_missing_pkg")
    except ModuleNotFoundError as exc:
        direct = exc
    assert missing_module_name(direct) == "jci_surely_missing_pkg"
    try:  # what pandas does for an optional dependency such as openpyxl
        raise ImportError("Missing optional dependency 'openpyxl'.") from direct
    except ImportError as exc:
        assert missing_module_name(exc) == "jci_surely_missing_pkg"
    assert missing_module_name(ImportError("cannot import name 'x' from 'y'")) is None
    assert missing_module_name(ValueError("No module named 'x'")) is None


@pytest.mark.parametrize(("setting", "can_ask", "mode"), [
    ("auto", True, "ask"), ("auto", False, "never"), ("ask", True, "ask"),
    ("ask", False, "never"), ("always", False, "always"), ("never", True, "never"),
])
def test_the_mode_follows_the_setting_and_whether_anyone_can_answer(
    setting: str, can_ask: bool, mode: str
) -> None:
    assert resolve_mode(setting, can_ask) == mode


def test_the_allow_list_compares_normalised_package_or_import_names() -> None:
    policy = InstallPolicy.of("always", ["Scikit_Learn", "yaml"], can_ask=False)
    assert decide("sklearn", policy, {}) == Install("sklearn", "scikit-learn", ask=False)
    assert decide("yaml", policy, {}) == Install("yaml", "pyyaml", ask=False)
    refused = decide("seaborn", policy, {})
    assert isinstance(refused, Refuse) and "install_allow" in refused.note
    assert "matplotlib" in refused.note  # what to use instead


def test_the_question_and_its_answers() -> None:
    assert question(Install("seaborn", "seaborn", True)) == "Install seaborn with pip? [y/N] "
    assert question(Install("sklearn", "scikit-learn", True)) == (
        'Install scikit-learn with pip (for "import sklearn")? [y/N] ')
    assert yes("y") and yes(" YES\n") and not yes("") and not yes("n") and not yes("yep")


def test_a_pip_run_that_installed_nothing_is_a_failed_step() -> None:
    done = checked_install("x", printed("Processing ./x.whl\nSuccessfully installed x-0.1\n"))
    assert done.ok
    failed = checked_install("x", printed(
        "ERROR: Could not find a version that satisfies the requirement x (from versions: none)\n"
        "ERROR: No matching distribution found for x\n"))
    assert failed.status == "error" and failed.error is not None
    assert failed.error.ename == "InstallFailed"
    assert "No matching distribution found for x" in failed.error.evalue


def start(loop: AskLoop, code: str = "import sklearn\nprint('fit')") -> RunCode:
    loop.start()
    run = loop.on_reply(call(code))
    assert isinstance(run, RunCode)
    return run


def test_always_installs_as_the_failed_steps_next_attempt_then_runs_the_code_again() -> None:
    loop = AskLoop("fit a model", install=ALWAYS, limits=Limits(max_fixes=1))
    start(loop)
    install = loop.on_result(no_module("sklearn"))
    assert install == RunCode("%pip install scikit-learn", 1, 2, "c1", 600.0,
                              kind="install", package="scikit-learn")
    retry = loop.on_result(printed("Successfully installed scikit-learn-1.5\n"))
    assert retry == RunCode("import sklearn\nprint('fit')", 2, 1, "c1", 60.0,
                            kind="retry", package="scikit-learn")
    # max_fixes=1: a counted failure would have ended the ask; the retry is no model fix.
    after = loop.on_result(printed("fit\n"))
    assert isinstance(after, CallModel)
    sent = after.request.messages[-1]
    assert sent.tool_call_id == "c1" and sent.content.startswith("fit\n")
    assert ("scikit-learn was missing, so it was installed (`%pip install scikit-learn`, "
            "step 1)") in sent.content
    assert "ran again as step 2" in sent.content
    # One tool result for the one call; the notebook keeps the install and the code.
    assert [m.role for m in after.request.messages].count("tool") == 1
    assert loop.succeeded == [(1, "%pip install scikit-learn"), (2, "import sklearn\nprint('fit')")]
    assert loop.on_reply(ModelReply(text="Fitted.")) == Finish("Fitted.")
    assert loop.step == 2 and loop.unresolved is None


def test_never_tells_the_model_to_do_without_and_counts_the_failure() -> None:
    loop = AskLoop("plot", install=InstallPolicy("never"))
    start(loop, "import seaborn as sns")
    nxt = loop.on_result(no_module("seaborn"))
    assert isinstance(nxt, CallModel) and loop.failures_in_a_row == 1
    sent = nxt.request.messages[-1].content
    assert "ModuleNotFoundError: No module named 'seaborn'" in sent
    assert "packages cannot be installed here" in sent
    assert "use matplotlib (or pandas' .plot()) instead of seaborn" in sent


def test_ask_waits_for_the_user_and_a_no_is_told_to_the_model() -> None:
    loop = AskLoop("plot", install=InstallPolicy("ask"))
    start(loop, "import seaborn")
    confirm = loop.on_result(no_module("seaborn"))
    assert confirm == ConfirmInstall("seaborn", "Install seaborn with pip? [y/N] ")
    nxt = loop.on_install_answer(False)
    assert isinstance(nxt, CallModel)
    assert "the user declined" in nxt.request.messages[-1].content
    # The same package is not asked about again in this ask.
    again = loop.on_reply(call("import seaborn", "c2"))
    assert isinstance(again, RunCode) and again.attempt == 2
    nxt = loop.on_result(no_module("seaborn"))
    assert isinstance(nxt, CallModel)
    assert "Not trying seaborn again: earlier in this ask it was declined by the user" in \
        nxt.request.messages[-1].content


def test_ask_with_a_yes_installs() -> None:
    loop = AskLoop("plot", install=InstallPolicy("ask"))
    start(loop, "import seaborn")
    assert isinstance(loop.on_result(no_module("seaborn")), ConfirmInstall)
    install = loop.on_install_answer(True)
    assert isinstance(install, RunCode) and install.code == "%pip install seaborn"


def test_a_failed_install_is_a_counted_failure_and_the_model_fixes_that_step() -> None:
    loop = AskLoop("plot", install=ALWAYS)
    start(loop, "import seaborn")
    loop.on_result(no_module("seaborn"))
    failed = checked_install("seaborn", printed("ERROR: No matching distribution found\n"))
    nxt = loop.on_result(failed)
    assert isinstance(nxt, CallModel) and loop.failures_in_a_row == 1
    sent = nxt.request.messages[-1].content
    assert "No module named 'seaborn'" in sent
    assert "seaborn was not installed: InstallFailed: pip did not install seaborn" in sent
    fix = loop.on_reply(call("import matplotlib", "c2"))
    # The fix replaces the install's cell (same step, next attempt).
    assert isinstance(fix, RunCode) and (fix.step, fix.attempt, fix.kind) == (1, 3, "code")
    assert loop.succeeded == []
