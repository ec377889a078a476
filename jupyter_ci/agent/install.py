"""Missing packages: which module is missing, which pip package provides it, may it be installed.

Pure decisions only: the loop asks for an install step, the driver asks the user when the
policy says so, and the kernel runs `%pip install <package>` like any other step.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Literal

from jupyter_ci.agent.types import CodeResult, ErrorInfo
from jupyter_ci.wire.frozen import frozen

InstallMode = Literal["ask", "always", "never"]

#: Import names whose pip package has another name.
PACKAGE_FOR_MODULE = {
    "sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
    "bs4": "beautifulsoup4", "skimage": "scikit-image", "dateutil": "python-dateutil",
    "dotenv": "python-dotenv", "Crypto": "pycryptodome", "docx": "python-docx",
    "pptx": "python-pptx", "fitz": "pymupdf", "serial": "pyserial", "jwt": "pyjwt",
    "OpenSSL": "pyopenssl", "attr": "attrs", "Bio": "biopython", "umap": "umap-learn",
    "MySQLdb": "mysqlclient", "psycopg2": "psycopg2-binary", "faiss": "faiss-cpu",
    "slugify": "python-slugify", "magic": "python-magic", "ruamel": "ruamel.yaml",
    "pkg_resources": "setuptools", "Levenshtein": "levenshtein", "wx": "wxPython",
    "sentence_transformers": "sentence-transformers",
}
#: Import names shared by many unrelated packages: installing by that name guesses wrong.
AMBIGUOUS = frozenset({"google", "azure", "mpl_toolkits"})
#: What a model can use instead, when a package cannot be installed.
ALTERNATIVES = {
    "seaborn": "matplotlib (or pandas' .plot())", "plotly": "matplotlib",
    "altair": "matplotlib", "polars": "pandas", "tabulate": "pandas' to_string()",
    "tqdm": "plain loops that print progress now and then", "statsmodels": "scipy.stats",
}
# PEP 508 names: letters, digits, and . _ - inside. Nothing else reaches the %pip line: no
# options (-i, --index-url), URLs, paths, version specifiers, or IPython's {var}/$var
# expansion.
_PACKAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_MODULE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# The message of ModuleNotFoundError when only its text crossed the wire (REST executor).
_NO_MODULE = re.compile(r"No module named '([^']+)'")
#: Seconds an install step may take (more than a code step: wheels can be large).
INSTALL_TIMEOUT = 600.0
_PIP_DONE = ("Successfully installed ", "Requirement already satisfied: ")


def resolve_mode(setting: str, can_ask: bool) -> InstallMode:
    """Turn the setting into this request's mode: nobody to ask means no asking."""
    if setting == "always":
        return "always"
    if setting in ("auto", "ask") and can_ask:
        return "ask"
    return "never"


def normalise(name: str) -> str:
    """Normalise a package name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@frozen
class InstallPolicy:
    """How missing packages are handled in one ask."""

    mode: InstallMode = "never"
    #: Normalised package (or import) names that may be installed; empty: any.
    allow: frozenset[str] = frozenset()

    @classmethod
    def of(cls, setting: str, allow: Iterable[str], can_ask: bool) -> InstallPolicy:
        """Build the policy from `c.JupyterCI.install`, `install_allow` and the request."""
        return cls(resolve_mode(setting, can_ask), frozenset(normalise(a) for a in allow))

    def allows(self, module: str, package: str) -> bool:
        """Tell whether the allow list (if any) lets this package be installed."""
        return not self.allow or bool({normalise(package), normalise(module)} & self.allow)


@frozen
class Install:
    """Install `package` (after asking the user when `ask`), then run the code again."""

    module: str
    package: str
    ask: bool


@frozen
class Refuse:
    """Do not install; `note` tells the model why and to do without."""

    note: str


def missing_module(error: ErrorInfo | None) -> str | None:
    """Return the name of the module a failed run could not import, if that is what failed."""
    if error is None:
        return None
    if error.module:
        return error.module
    if error.ename == "ModuleNotFoundError":
        found = _NO_MODULE.fullmatch(error.evalue.strip())
        return found.group(1) if found else None
    return None


def package_for(module: str) -> str:
    """Name the pip package that provides an importable top-level module."""
    return PACKAGE_FOR_MODULE.get(module, module)


def decide(module: str, policy: InstallPolicy, tried: dict[str, str]) -> Install | Refuse | None:
    """Say what to do about a missing module; None when installing cannot help at all."""
    if module.startswith("."):
        return None  # a relative import: the user's own package, not pip's
    parts = module.split(".")
    if not all(_MODULE.fullmatch(part) for part in parts) or parts[0] in AMBIGUOUS:
        return Refuse(f"[`{_shown(module)}` is not a package name jupyter-ci installs. "
                      f"{do_without(module)}]")
    if len(parts) > 1:
        # Python names the first missing part: here the parent imported, a submodule did not.
        return None
    if module in sys.stdlib_module_names:
        return Refuse(f"[`{module}` belongs to Python's standard library, which pip cannot "
                      f"install; this Python was built without it. {do_without(module)}]")
    package = package_for(module)
    if not _PACKAGE.fullmatch(package):
        return Refuse(f"[`{_shown(package)}` is not a plain package name. {do_without(module)}]")
    earlier = tried.get(normalise(package))
    if earlier is not None:
        return Refuse(f"[Not trying {package} again: earlier in this ask it was {earlier}. "
                      f"{do_without(module)}]")
    if policy.mode == "never":
        return Refuse(f"[`{module}` is not installed, and packages cannot be installed here "
                      f"(install policy: never). {do_without(module)}]")
    if not policy.allows(module, package):
        return Refuse(f"[`{module}` is not installed, and {package} is not among the packages "
                      f"that may be installed here (c.JupyterCI.install_allow). "
                      f"{do_without(module)}]")
    return Install(module, package, ask=policy.mode == "ask")


def do_without(module: str) -> str:
    """Tell the model to go on without the module, naming an alternative when one is known."""
    instead = ALTERNATIVES.get(module)
    use = f"use {instead} instead of {module}" if instead else (
        "use what is installed (the context's Environment section lists the usual libraries)")
    return f"Do without it: {use}, or tell the user which package the task needs."


def _shown(name: str) -> str:
    """Quote an untrusted name briefly, without backticks that could end the code span."""
    return name.replace("`", "'")[:80]


def question(install: Install) -> str:
    """The question put to the user on stdin, as input() would show it."""
    why = f' (for "import {install.module}")' if install.package != install.module else ""
    return f"Install {install.package} with pip{why}? [y/N] "


def yes(answer: str) -> bool:
    """Read the user's answer: only y or yes installs."""
    return answer.strip().lower() in ("y", "yes")


def install_code(package: str) -> str:
    """The code of the install step: what a re-run of the notebook runs too."""
    return f"%pip install {package}"


def checked_install(package: str, result: CodeResult) -> CodeResult:
    """Mark an install step failed when pip did not install (the %pip magic never raises)."""
    if not result.ok:
        return result
    text = "".join(str(o.get("text", "")) for o in result.outputs
                   if o.get("output_type") == "stream")
    if any(done in text for done in _PIP_DONE):
        return result
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("ERROR")]
    said = lines[-1][:300] if lines else "it reported no installation"
    return CodeResult("error", result.outputs, result.duration_s, result.execution_count,
                      ErrorInfo("InstallFailed", f"pip did not install {package}: {said}"))


def installed_note(module: str, package: str, install_step: int, retry_step: int) -> str:
    """Tell the model its code was run again after an install."""
    return (f"[`import {module}` failed at first: {package} was missing, so it was installed "
            f"(`{install_code(package)}`, step {install_step}) and your code ran again as step "
            f"{retry_step}; the result above is from that run.]")


def failed_note(module: str, package: str, how: str) -> str:
    """Tell the model an install did not happen, and to do without."""
    return f"[`{module}` is not installed and {package} was not installed: {how}. " \
        f"{do_without(module)}]"
