"""The result of one execute as the client gives it: `Execution`, its `Result`s, logs and error.

Named as E2B's code-interpreter SDK names them (`execution.text`, `.results`, `.logs.stdout`,
`.error.name`), so code written against it reads the same here; `summary` is what a model reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from jupyter_ci.agent.chart_text import CHART_MIME
from jupyter_ci.agent.feedback import format_result
from jupyter_ci.agent.types import CodeResult, ErrorInfo, RunStatus
from jupyter_ci.wire import rest
from jupyter_ci.wire.charts import Chart
from jupyter_ci.wire.codec import WireError, decode
from jupyter_ci.wire.nbformat import ErrorOutput, MimeBundle, NbOutput
from jupyter_ci.wire.shapes import FileEntryJSON, shape_of

#: Characters of a run's text given back to the model (head and tail kept).
TOOL_TEXT_CHARS = 20_000
_IMAGE_TYPES = ("image/png", "image/jpeg")
_STATUS: dict[str, RunStatus] = {"ok": "ok", "error": "error", "timeout": "timeout",
                                 "dead": "died"}
#: What the model reads of a run whose kernel died (the server sends no error output then),
#: with how the reader's client restarts a session.
DIED = ("the kernel died (out of memory, a crash, or the process exited): its variables and "
        "imports are lost and no more code can run until {restart}; after that, run again "
        "what the task needs")
#: How this package's client restarts a session.
RESTART = "the session is restarted (Session.restart())"


#: The nbformat v4 output types (every output the server sends is one of them).
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def is_output(value: Mapping[str, object]) -> TypeGuard[NbOutput]:
    """Return whether a JSON object is an nbformat output (by its `output_type`)."""
    return value.get("output_type") in OUTPUT_TYPES


def _joined(value: object) -> str:
    """Return an nbformat multiline string (a string or a list of lines) as one string."""
    return "".join(value) if isinstance(value, list) else str(value)


@dataclass(frozen=True)
class Result:
    """One value the code showed: the last expression's (`is_main_result`) or a display."""

    data: MimeBundle
    is_main_result: bool = False
    metadata: dict[str, object] = field(default_factory=dict)

    def _get(self, mime: str) -> str | None:
        value = self.data.get(mime)
        return None if value is None else _joined(value)

    @property
    def text(self) -> str | None:
        """The plain-text form (`text/plain`)."""
        return self._get("text/plain")

    @property
    def html(self) -> str | None:
        """The HTML form, if any."""
        return self._get("text/html")

    @property
    def markdown(self) -> str | None:
        """The Markdown form, if any."""
        return self._get("text/markdown")

    @property
    def svg(self) -> str | None:
        """The SVG form, if any."""
        return self._get("image/svg+xml")

    @property
    def png(self) -> str | None:
        """The PNG image, base64, if any."""
        png = self._get("image/png")
        return None if png is None else png.replace("\n", "")

    @property
    def jpeg(self) -> str | None:
        """The JPEG image, base64, if any."""
        jpeg = self._get("image/jpeg")
        return None if jpeg is None else jpeg.replace("\n", "")

    @property
    def json(self) -> Any:
        """The `application/json` value, if any (already parsed)."""
        return self.data.get("application/json")

    @property
    def chart(self) -> Chart | None:
        """A matplotlib figure's data (E2B's `result.chart`), or None: none, or unreadable."""
        value = self.data.get(CHART_MIME)
        try:
            return None if value is None else decode(Chart, value, lenient=True)
        except WireError:
            return None

    def formats(self) -> list[str]:
        """Return the MIME types this result has."""
        return list(self.data)


@dataclass(frozen=True)
class Logs:
    """What the code printed: each stream output's text, in order."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


class ExecutionError(dict[str, object]):
    """The error output of a run: `name`, `value`, `traceback` (also `["ename"]` and so on)."""

    @property
    def name(self) -> str:
        """The exception's class name, as `ZeroDivisionError`."""
        return str(self.get("ename", ""))

    @property
    def value(self) -> str:
        """The exception's message."""
        return str(self.get("evalue", ""))

    @property
    def traceback(self) -> str:
        """The traceback as one plain-text string."""
        return "\n".join(self.lines)

    @property
    def lines(self) -> list[str]:
        """The traceback's lines (ANSI colours kept), as the kernel sent them."""
        lines = self.get("traceback", [])
        return [str(line) for line in lines] if isinstance(lines, list) else []


@dataclass(frozen=True)
class Execution:
    """The result of one execute: status, nbformat outputs, count, duration and files."""

    status: str
    outputs: list[NbOutput] = field(default_factory=list)
    execution_count: int | None = None
    duration_ms: float = 0.0
    files: list[FileEntryJSON] = field(default_factory=list)
    #: The directory held more than the server looks at: `files` may miss some.
    files_cut: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, object] | str) -> Execution:
        """Build from the API's result object (or its JSON text, as to_json gives it)."""
        value = json.loads(data) if isinstance(data, str) else data
        return cls.of(decode(rest.Execution, value, lenient=True))

    @classmethod
    def of(cls, run: rest.Execution) -> Execution:
        """Build from the API's result as its wire class."""
        return cls(run.status, [o for o in run.outputs if is_output(o)], run.execution_count,
                   run.duration_ms, [shape_of(f) for f in run.files], run.files_cut)

    def to_dict(self) -> dict[str, object]:
        """Return the API's result object (status, outputs, execution_count, ...)."""
        return {"status": self.status, "outputs": self.outputs,
                "execution_count": self.execution_count, "duration_ms": self.duration_ms,
                "files": self.files, "files_cut": self.files_cut}

    def to_json(self) -> str:
        """Return the result as JSON text (from_json reads it back)."""
        return json.dumps(self.to_dict())

    @property
    def error(self) -> ExecutionError | None:
        """The error (`.name`, `.value`, `.traceback`), if the code raised."""
        found = next((o for o in self.outputs if _is_error(o)), None)
        return None if found is None else ExecutionError(found)

    @property
    def results(self) -> list[Result]:
        """The values the code showed, in order: displays and the last expression's."""
        return [Result(dict(o.get("data", {})), o["output_type"] == "execute_result",
                       dict(o.get("metadata", {}))) for o in self.outputs
                if o["output_type"] == "execute_result" or o["output_type"] == "display_data"]

    @property
    def logs(self) -> Logs:
        """What the code printed to stdout and stderr, one string per stream output."""
        streams = [o for o in self.outputs if o["output_type"] == "stream"]
        return Logs([_joined(o.get("text", "")) for o in streams if o.get("name") == "stdout"],
                    [_joined(o.get("text", "")) for o in streams if o.get("name") == "stderr"])

    @property
    def images(self) -> list[tuple[str, str]]:
        """(MIME type, base64 data) of every PNG or JPEG the code displayed."""
        return [(mime, _joined(o["data"][mime]).replace("\n", "")) for o in self.outputs
                if o["output_type"] == "execute_result" or o["output_type"] == "display_data"
                for mime in _IMAGE_TYPES if mime in o.get("data", {})]

    @property
    def text(self) -> str:
        """The last expression's plain value (`'1'`), as E2B's; else (prints, errors) `summary`."""
        main = next((r.text for r in self.results if r.is_main_result), None)
        return main if main is not None else self.summary

    @property
    def summary(self) -> str:
        """What the run showed, as a model reads it: outputs, `Out:` value, error, images noted."""
        return self.summarized()

    def summarized(self, restart: str = RESTART) -> str:
        """Return `summary`; a dead kernel's says how to go on in `restart`'s words."""
        error = self.error
        info = ErrorInfo(error.name, error.value, tuple(error.lines)) if error is not None \
            else ErrorInfo("KernelDied", DIED.format(restart=restart)) \
            if self.status == "dead" else None
        result = CodeResult(_STATUS.get(self.status, "error"), self.outputs,
                            self.duration_ms / 1000, self.execution_count, info)
        return format_result(result, self.duration_ms / 1000, TOOL_TEXT_CHARS)


def _is_error(output: NbOutput) -> TypeGuard[ErrorOutput]:
    return output["output_type"] == "error"
