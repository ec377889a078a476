"""The settings the kernel's `%%ask` and the server both read (`JupyterCI`), and the server's.

The REST sessions' and the sandbox's own settings are in config_sessions.py; all are set as
`c.JupyterCI.<name>`.
"""

from __future__ import annotations

import json
import os

from traitlets import (
    Bool,
    Bunch,
    CaselessStrEnum,
    Dict,
    Enum,
    Float,
    Int,
    List,
    TraitError,
    Unicode,
    default,
    validate,
)

from jupyter_ci.agent.cost import PriceError, parse_prices
from jupyter_ci.agent.images import Vision
from jupyter_ci.agent.install import InstallPolicy
from jupyter_ci.agent.loop import Limits
from jupyter_ci.config_sessions import SandboxSettings, SessionSettings, Settings
from jupyter_ci.models.base import SeesImages
from jupyter_ci.models.broker import ENV_PRICES
from jupyter_ci.models.resolve import ModelSettings, vision_enabled
from jupyter_ci.wire.hub import ENV_HUB_URL


class JupyterCI(Settings):
    """Settings for jupyter-ci; set them as `c.JupyterCI.<name>` in any Jupyter config."""

    model = Unicode(
        "",
        help="Default model as provider:model (e.g. openai:gpt-5.5). Empty: the environment "
        "variable JUPYTER_CI_MODEL, else a default for whichever provider key is present.",
    ).tag(config=True)

    models = List(
        Unicode(),
        default_value=[],
        help="Models offered in the JupyterLab model picker, as provider:model. "
        "Empty: the default model of each configured provider.",
    ).tag(config=True)

    fallback_model = Unicode(
        "",
        help="Model used only when none is configured (no -m, no model setting, no provider "
        "key, nothing behind the server's model service), e.g. `replay:recordings` in a demo "
        "notebook, so it runs before a key is set; %%ask only (REST asks never use it). "
        "Empty (default): such an ask fails saying what to set.",
    ).tag(config=True)
    record_dir = Unicode(
        "",
        help="Folder where every ask writes a recording: the model's replies turn by turn "
        "(text and tool calls), the prompt and the model id, as JSON named by a hash of the "
        "prompt (no keys, context or outputs). `-m replay:<folder or file>` plays them back "
        "without a key or network. Relative to the kernel's working directory. Default: the "
        "environment variable JUPYTER_CI_RECORD_DIR, else none (nothing is recorded).",
    ).tag(config=True)

    timeout = Float(60.0, help="Seconds one generated code run may take before it is "
                    "interrupted (default 60).").tag(config=True)
    max_steps = Int(10, help="Code runs (tool calls) allowed in one ask (default 10).").tag(
        config=True
    )
    max_fixes = Int(3, help="Consecutive failed runs allowed before the ask gives up "
                    "(default 3).").tag(config=True)
    max_output_chars = Int(20_000, help="Characters of one code run's output sent back to "
                           "the model; longer output keeps its head and tail "
                           "(default 20000).").tag(config=True)
    context_tokens = Int(3_000, help="Approximate tokens of kernel context (variables, "
                         "history, files) sent with each ask (default 3000).").tag(config=True)
    memory_tokens = Int(6_000, help="Approximate tokens of earlier asks in this kernel kept "
                        "as conversation memory (default 6000).").tag(config=True)
    max_reply_tokens = Int(4_096, help="Tokens the model may write in one reply "
                           "(default 4096).").tag(config=True)
    max_ask_tokens = Int(400_000, help="Input plus output tokens one ask may use over all its "
                         "model calls (default 400000).").tag(config=True)
    vision = Enum(
        ("auto", "on", "off"), "auto",
        help="Show the model the images its code displays (charts), so it can check them. "
        "auto (default): on, except for models known to take text only (e.g. gpt-3.5, "
        "claude-2); an OpenAI-compatible server that rejects images with HTTP 400 is asked "
        "again without them, and not sent images again while the kernel runs. on, off.",
    ).tag(config=True)
    max_images = Int(10, help="Images one ask may send to the model; later ones are left "
                     "out with a note (default 10).").tag(config=True)
    max_image_side = Int(1024, help="Longest side, in pixels, of an image sent to the model; "
                         "larger ones are downscaled (default 1024).").tag(config=True)
    retries = Int(3, help="Retries of a model call after a transient failure (429, 5xx, "
                  "timeout), with exponential backoff (default 3).").tag(config=True)
    request_timeout = Float(120.0, help="Seconds to wait for a model response "
                            "(default 120).").tag(config=True)

    install = CaselessStrEnum(
        ["auto", "ask", "always", "never"], default_value="auto",
        help="What happens when generated code imports a package that is not installed: "
        "'ask' asks you on the kernel's stdin (\"Install seaborn with pip? [y/N]\"), then "
        "installs it with `%pip install` as a step of its own and runs the code again; "
        "'always' installs without asking; 'never' tells the model to do without. 'auto' "
        "(default): 'ask' where the frontend can answer (a request that allows stdin: "
        "JupyterLab, Notebook 7, VS Code), else 'never' (nbclient, papermill, REST asks).",
    ).tag(config=True)
    install_allow = List(
        Unicode(), default_value=[],
        help="Packages (pip names, or import names) that may be installed; others are "
        "refused and the model is told to do without. Empty (default): any package.",
    ).tag(config=True)

    approval = Enum(
        ("never", "first", "plan", "each"), "never",
        help="When an ask waits for you before code runs: 'never' (default: every step runs "
        "at once), 'first' (the first step waits for Run / Edit / Skip / Stop, then it runs "
        "on), 'plan' (the model first proposes a numbered plan you can edit; once you "
        "approve it, it runs on), 'each' (every step waits). In JupyterLab the step's code "
        "waits in its cell with the buttons; elsewhere the question goes to the kernel's "
        "stdin; an ask with no one to answer (nbclient, papermill) refuses to start. "
        "`%%ask --approve MODE` sets it for one ask; approval_minimum can only raise it.",
    ).tag(config=True)
    approval_minimum = Enum(
        ("never", "first", "plan", "each"), "never",
        help="The least approval every ask gets, set by an admin in the server's config "
        "(order: never < first < plan < each): kernels the server starts get it in their "
        "environment (JUPYTER_CI_APPROVAL_MINIMUM) and REST asks read it here, and a "
        "kernel's own approval setting, %config or --approve cannot lower it. The server "
        "enforces it for REST and MCP asks; in a notebook's kernel the check is code in "
        "that kernel, which code run there can undo (default 'never').",
    ).tag(config=True)
    instructions = Unicode(
        "",
        help="Standing instructions added to every ask's system prompt (e.g. \"Use polars, "
        "not pandas. Plots in the company palette.\"), with those of AGENTS.md or "
        ".jupyter-ci.md files in the notebook's folder and the folders above it (up to your "
        "home folder); shown in the \"What the model was sent\" disclosure and redacted "
        "like the rest. REST asks use this setting only (default: none).",
    ).tag(config=True)

    max_tokens_per_kernel = Int(
        0,
        help="Model tokens (input plus output, as the provider reports them) one kernel, or "
        "one REST session's asks, may use through the server's model service, over restarts. "
        "Each model call reserves its request's size plus its reply limit first and settles "
        "on the usage reported, so calls running at once pass the limit by one reservation "
        "at most; a call the client hangs up on costs what the provider reported, else its "
        "reservation. Calls past it end the ask with LimitReached. 0 (default) = unlimited.",
    ).tag(config=True)
    max_tokens_per_server = Int(
        0,
        help="Model tokens (input plus output) all kernels and sessions together may use "
        "through the model service while the server runs, like max_tokens_per_kernel. "
        "0 (default) = unlimited.",
    ).tag(config=True)
    prices = Dict(
        default_value={},
        help="Model prices, USD per million tokens, by model id or prefix: {\"openai:gpt-4.1\": "
        "{\"input\": 2.0, \"output\": 8.0, \"cached_input\": 0.5, \"context_window\": "
        "1047576}}; cached_input (prompt tokens read from the provider's cache; default: "
        "input) and context_window (tokens) may be left out. The longest key that starts "
        "the model's provider:model id wins, whatever its case and the spaces around either "
        "part; a key without provider:, such as gpt-4.1, "
        "matches that model name under any provider. Entries here come before the built-in "
        "prices of OpenAI's and Anthropic's current models. An ask shows its tokens and cost "
        "(cell log, panel, REST result); a model no entry covers (Ollama, a local server) "
        "shows tokens only. Kernels a server starts take the server's prices unless their "
        "own config sets them. Default: {} (the built-in prices).",
    ).tag(config=True)
    max_cost_per_kernel = Float(
        0.0, min=0.0,
        help="USD one kernel, or one REST session's asks, may spend through the server's "
        "model service, over restarts: each call's reported usage priced by the model it "
        "names (see prices), reserved and settled like max_tokens_per_kernel. Calls past it "
        "end the ask with LimitReached. While it or max_cost_per_server is set, a model "
        "without a price is refused (ModelConfigError naming it: add it to prices). "
        "0 (default) = unlimited.",
    ).tag(config=True)
    max_cost_per_server = Float(
        0.0, min=0.0,
        help="USD all kernels and sessions together may spend through the model service "
        "while the server runs, like max_cost_per_kernel. 0 (default) = unlimited.",
    ).tag(config=True)

    @validate("prices")
    def _check_prices(self, proposal: Bunch) -> dict[str, object]:
        try:
            parse_prices(proposal["value"])
        except PriceError as error:
            raise TraitError(str(error)) from None
        return dict(proposal["value"])
    broker_max_body_bytes = Int(
        32 * 1024 * 1024,
        help="Largest model turn, in bytes, a kernel may send the model service; "
        "larger ones get HTTP 413 before they are read (default 33554432, 32 MiB). "
        "ServerApp.max_body_size still caps it.",
    ).tag(config=True)

    harden_process = Bool(
        True,
        help="Make the Jupyter server process non-dumpable (Linux prctl PR_SET_DUMPABLE), so "
        "kernels and other processes of your user cannot read the provider keys from "
        "/proc/<server pid>/environ or /proc/<server pid>/mem. Kernels are unaffected. Turn "
        "it off to attach a debugger or profiler (gdb, py-spy) to the server, or for tools "
        "that read the server's /proc files without root (e.g. its open files or I/O "
        "counters).",
    ).tag(config=True)
    key_file = Unicode(
        "",
        help="A file holding provider keys outside any process environment: a JSON object or "
        "NAME=value lines, with names such as OPENAI_API_KEY or ANTHROPIC_BASE_URL. It must "
        "be yours and private (chmod 600). An environment variable wins over the file; the "
        "file wins over the keyring. Keys the panel remembers are written to it as JSON. "
        "Default: the environment variable JUPYTER_CI_KEY_FILE, else "
        "<jupyter data dir>/jupyter_ci/keys.json.",
    ).tag(config=True)

    broker_url = Unicode(
        "",
        help="The URL kernels use to reach the model service, e.g. "
        "https://jupyter.example.org/jupyter-ci/broker when kernels run on other machines "
        "(a gateway, --gateway-url). Default: this server's own address on the loopback.",
    ).tag(config=True)

    hub_url = Unicode(
        "",
        help="Under JupyterHub: the URL of the Hub's jupyter-ci service (ending with its "
        "prefix, e.g. http://127.0.0.1:10101/services/jupyter-ci/). With it, and the "
        "server's JUPYTERHUB_API_TOKEN, the server holds no provider key: every model turn "
        "goes to that service as the server's user, which judges and charges it by the "
        "Hub's policy, and the policy's approval floor and boxing apply here. Default: the "
        "environment variable JUPYTER_CI_HUB_URL, which jupyter_ci.hub.configure sets for "
        "every user's server; empty: no Hub service (keys held by this server).",
    ).tag(config=True)

    @default("hub_url")
    def _hub_url_default(self) -> str:
        return os.environ.get(ENV_HUB_URL, "")

    @default("key_file")
    def _key_file_default(self) -> str:
        return os.environ.get("JUPYTER_CI_KEY_FILE", "")

    @default("record_dir")
    def _record_dir_default(self) -> str:
        return os.environ.get("JUPYTER_CI_RECORD_DIR", "")

    @default("prices")
    def _prices_default(self) -> dict[str, object]:
        # A kernel under a server prices as the server does (app.py publishes its table).
        try:
            published = json.loads(os.environ.get(ENV_PRICES, "") or "{}")
            parse_prices(published)
        except (ValueError, PriceError):
            return {}
        return dict(published) if isinstance(published, dict) else {}

    @default("model")
    def _model_default(self) -> str:
        return os.environ.get("JUPYTER_CI_MODEL", "")

    # What the settings become for one ask: the same for %%ask and a REST ask.

    def limits(self, model: SeesImages | None, max_steps: int | None = None,
               max_fixes: int | None = None, timeout: float | None = None) -> Limits:
        """Return an ask's limits: its own where given, else these settings."""
        # No model (a headless re-run, a dry run without one): outputs are read as text only.
        vision = Vision(model is not None and vision_enabled(self.vision, model),
                        self.max_images, self.max_image_side)
        return Limits(max_steps=max_steps or self.max_steps,
                      max_fixes=max_fixes or self.max_fixes, timeout=timeout or self.timeout,
                      max_output_chars=self.max_output_chars, max_tokens=self.max_ask_tokens,
                      max_reply_tokens=self.max_reply_tokens, vision=vision)

    def model_settings(self) -> ModelSettings:
        """Return what resolving an ask's model needs."""
        return ModelSettings(self.model, self.request_timeout, self.retries, self.record_dir,
                             self.fallback_model)

    def install_policy(self, can_ask: bool) -> InstallPolicy:
        """Return what happens to a missing package, given whether the user can be asked."""
        return InstallPolicy.of(self.install, self.install_allow, can_ask)


class ServerSettings(JupyterCI, SessionSettings, SandboxSettings):
    """What the server reads: the shared settings and its services' (`c.JupyterCI.<name>`)."""
