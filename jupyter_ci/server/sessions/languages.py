"""The languages of REST sessions: which kernelspec runs a language, and per-run variables.

A session's language is its kernelspec's `language` field, lower-cased (bash_kernel says
"bash", Deno's kernel "typescript", IRkernel "r"). `language` on creation picks a kernelspec
of that language, the server's default kernel first; a few aliases name the same one
("javascript", "js" and "ts" are Deno's; "jshell" is jjava's Java).
`scripts/install-languages.sh` installs the kernels. Asks write Python, so only Python
sessions take them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_ci.agent.types import CodeResult, Output
from jupyter_ci.server.sessions.errors import SessionError

PYTHON = "python"
#: Other names for a language, as a client may write them.
ALIASES = {"python3": PYTHON, "py": PYTHON, "javascript": "typescript", "js": "typescript",
           "ts": "typescript", "deno": "typescript", "sh": "bash", "shell": "bash",
           "jshell": "java", "jjava": "java"}
#: Seconds of quiet a run of these languages waits for after its idle status: Deno's kernel
#: (2.x) sometimes publishes idle before the run's last outputs, from another task.
LATE_OUTPUTS_S = {"typescript": 0.05}
#: jjava's error for a thrown exception: ename "RuntimeException", evalue "<class>, <message>".
_JAVA_THROWN = re.compile(r"((?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*), (.*)", re.DOTALL)
#: The languages `env_prelude` can set variables in.
ENV_LANGUAGES = (PYTHON, "bash", "typescript", "r")


class UnknownLanguage(SessionError):
    """No installed kernelspec runs the language asked for, or it is not the kernel's."""

    status, reason = 400, "unknown_language"


class AskNeedsPython(SessionError):
    """An ask in a session whose kernel is not Python: asks write and run Python."""

    status, reason = 400, "ask_needs_python"


class LanguageMismatch(SessionError):
    """An execute names a language its session's kernel does not run."""

    status, reason = 400, "language_mismatch"


def normalize(language: str) -> str:
    """Return the name a language goes by here: lower case, aliases resolved."""
    name = language.strip().lower()
    return ALIASES.get(name, name)


def spec_language(spec: Any) -> str:
    """Return a kernelspec's language (a model dict, or a KernelSpec), normalized."""
    if isinstance(spec, dict):
        spec = spec.get("spec", spec)
        language = spec.get("language")
    else:
        language = getattr(spec, "language", None)
    return normalize(language) if isinstance(language, str) and language else ""


async def specs(km: Any) -> dict[str, object]:
    """Return the kernelspecs the kernel manager can start, by name."""
    found = await ensure_async(km.kernel_spec_manager.get_all_specs())
    return dict(found.get("kernelspecs", found) if isinstance(found, dict) else {})


async def pick(km: Any, language: str | None, kernel_name: str | None, default: str
               ) -> tuple[str, str]:
    """Return (kernelspec name, language) for a session asking for either, or neither."""
    found = await specs(km)
    name = kernel_name or default
    if language is None:
        # An unknown kernel_name fails when it starts, with the names there are.
        return name, spec_language(found.get(name)) or PYTHON
    wanted = normalize(language)
    if kernel_name is not None:
        have = spec_language(found.get(kernel_name))
        if have and have != wanted:
            raise UnknownLanguage(f"The kernel {kernel_name!r} runs {have}, not {wanted}: "
                                  "give one of kernel_name and language, or matching ones.")
        return kernel_name, wanted
    if spec_language(found.get(default)) == wanted:
        return default, wanted
    # Unboxed kernelspecs first: whether to box one is the sandbox's choice (sandbox.py).
    matching = sorted((_boxing(spec), spec_name) for spec_name, spec in found.items()
                      if spec_language(spec) == wanted)
    if not matching:
        raise UnknownLanguage(f"No kernel here runs {language!r}. Installed languages: "
                              f"{', '.join(installed(found))} (scripts/install-languages.sh "
                              "installs bash, JavaScript/TypeScript and Java).")
    return matching[0][1], wanted


def installed(found: dict[str, object]) -> list[str]:
    """Return the languages the kernelspecs run, sorted (Deno's also as javascript)."""
    languages = {spec_language(spec) for spec in found.values()} - {""}
    return sorted(languages | ({"javascript"} if "typescript" in languages else set()))


def _boxing(spec: Any) -> bool:
    """Tell a kernelspec whose metadata names a kernel provisioner (such as the sandbox)."""
    if isinstance(spec, dict):
        spec = spec.get("spec", spec)
        metadata = spec.get("metadata") or {}
    else:
        metadata = getattr(spec, "metadata", None) or {}
    return bool(metadata.get("kernel_provisioner"))


def check_ask(language: str) -> None:
    """Refuse an ask in a session that does not run Python."""
    if language != PYTHON:
        raise AskNeedsPython(
            f"This session runs {language}, and asks write and run Python: create a Python "
            "session (POST /jupyter-ci/sessions without 'language', or with "
            "\"language\": \"python\") to ask; execute runs code in this one.")


def check_run(language: str | None, session_language: str) -> None:
    """Refuse a run whose `language` (aliases as on creation) is not its session's."""
    if language is None or normalize(language) == normalize(session_language):
        return
    have, wanted = normalize(session_language), normalize(language)
    raise LanguageMismatch(
        f"This session runs {have}, not {wanted or repr(language)}: nothing was run. Run "
        f"{have} here (or leave 'language' out), or create a {wanted or 'new'} session "
        f"(POST /jupyter-ci/sessions with {{\"language\": {json.dumps(language)}}}) and run "
        "the code there.")


def name_error(result: CodeResult) -> None:
    """Name an error as its language would: bash_kernel and jjava do not."""
    # bash_kernel sends only the exit status; jjava calls every thrown exception
    # RuntimeException, its class and message in evalue.
    if result.error is None:
        return
    was = result.error.ename
    thrown = _JAVA_THROWN.fullmatch(result.error.evalue) if was == "RuntimeException" else None
    if thrown:  # the simple name, as Java prints it (a JShell class: REPL.$JShell$13$MyError)
        ename = re.split(r"[.$]", thrown.group(1))[-1]
        evalue = "" if thrown.group(2) == "null" else thrown.group(2)
    elif not was:
        ename = "ExitStatus"
        evalue = f"the last command exited with status {result.error.evalue}"
    else:
        return
    result.error = dataclasses.replace(result.error, ename=ename, evalue=evalue)
    result.outputs = [_named(output, was, ename, evalue) for output in result.outputs]


def _named(output: Output, was: str, ename: str, evalue: str) -> Output:
    """Return an output, the error output named `was` renamed `ename` with `evalue`."""
    if output["output_type"] != "error" or output.get("ename", "") != was:
        return output
    named: Output = {**output, "ename": ename, "evalue": evalue}
    return named


def env_prelude(language: str, envs: dict[str, str]) -> tuple[str, str]:
    """Return (prelude, epilogue): code that sets `envs` for one run, and restores them."""
    bad = [name for name in envs if not name.isidentifier()]
    if bad:
        raise ValueError(f"not variable names: {', '.join(bad)}")
    language = normalize(language)
    if not envs:
        return "", ""
    if language == PYTHON:
        return _python(envs)
    if language == "bash":
        return _bash(envs)
    if language == "typescript":
        return _javascript(envs)
    if language == "r":
        return _r(envs)
    raise ValueError(f"per-run variables are not supported in {language}; they are in "
                     f"{', '.join(ENV_LANGUAGES)}")


def _python(envs: dict[str, str]) -> tuple[str, str]:
    """Set and restore variables in a Python kernel (os.environ, which subprocesses see)."""
    prelude = ("__jci_env = __import__('os').environ\n"
               f"__jci_saved = {{k: __jci_env.get(k) for k in {list(envs)!r}}}\n"
               f"__jci_env.update({envs!r})\n")
    epilogue = ("for __jci_k, __jci_v in __jci_saved.items():\n"
                "    if __jci_v is None:\n"
                "        __jci_env.pop(__jci_k, None)\n"
                "    else:\n"
                "        __jci_env[__jci_k] = __jci_v\n"
                "del __jci_env, __jci_saved, __jci_k, __jci_v\n")
    return prelude, epilogue


def _bash(envs: dict[str, str]) -> tuple[str, str]:
    """Set and restore variables in bash: `declare -p` keeps the old value and its export."""
    saves, sets, restores = [], [], []
    for name, value in envs.items():
        saved = f"__jci_saved_{name}"
        saves.append(f"{saved}=$(declare -p {name} 2>/dev/null)")
        sets.append(f"export {name}={shlex.quote(value)}")
        # eval at the top level: the saved `declare` sets the global again, as it was.
        restores.append(f'unset {name}; eval "${saved}"; unset {saved}')
    return "\n".join([*saves, *sets, "true"]) + "\n", "\n".join([*restores, "true"]) + "\n"


def _javascript(envs: dict[str, str]) -> tuple[str, str]:
    """Set and restore variables through `process.env` (Deno 2 and Node both have it)."""
    prelude = (f"globalThis.__jciEnv = Object.fromEntries({json.dumps(list(envs))}"
               ".map((k) => [k, process.env[k]]));\n"
               f"Object.assign(process.env, {json.dumps(envs)});\nvoid 0;\n")
    epilogue = ("for (const [k, v] of Object.entries(globalThis.__jciEnv)) {\n"
                "  if (v === undefined) delete process.env[k]; else process.env[k] = v;\n"
                "}\ndelete globalThis.__jciEnv;\nvoid 0;\n")
    return prelude, epilogue


def _r(envs: dict[str, str]) -> tuple[str, str]:
    """Set and restore variables in R (Sys.setenv; NA marks one that was unset)."""
    # A JSON string without ASCII escapes is an R string literal too.
    sets = ", ".join(f"{json.dumps(k)} = {json.dumps(v, ensure_ascii=False)}"
                     for k, v in envs.items())
    prelude = (f".jci_saved <- Sys.getenv(c({', '.join(map(json.dumps, envs))}), unset = NA, "
               f"names = TRUE)\nSys.setenv({sets})\ninvisible(NULL)\n")
    epilogue = ("for (.jci_k in names(.jci_saved)) if (is.na(.jci_saved[[.jci_k]])) "
                "Sys.unsetenv(.jci_k) else do.call(Sys.setenv, as.list(.jci_saved[.jci_k]))\n"
                "rm(.jci_saved, .jci_k)\ninvisible(NULL)\n")
    return prelude, epilogue
