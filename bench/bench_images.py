"""Measure what the model receives for a matplotlib plot: bytes and estimated tokens per image.

Runs an ask in a real kernel against the fake model server (as OpenAI), with plots made by
the inline backend, and reads the image the request carried: its size in pixels, its base64
bytes, and the token estimate the ask's budget counts. Also times the downscaling.

    python bench/bench_images.py
"""

from __future__ import annotations

import base64
import io
import tempfile
import time
from pathlib import Path

from PIL import Image as PILImage

from jupyter_ci.agent.images import image_tokens, shrink
from tests.fakellm import FakeLLM, Turn
from tests.fakellm_wire import image_parts
from tests.nbrun import openai_env, run_cells

PLOTS = {
    "default figure (6.4x4.8 in)": "plt.figure()",
    "16x12 in at 100 dpi (inline crops it)": "plt.figure(figsize=(16, 12), dpi=100)",
}
# The inline backend saves with bbox_inches="tight"; this shows an uncropped 1600x1200 PNG.
EXACT = ("import io\nfrom IPython.display import Image, display\n"
         "fig = plt.figure(figsize=(16, 12), dpi=100)\n"
         "{draw}buf = io.BytesIO()\nfig.savefig(buf, format='png')\nplt.close(fig)\n"
         "display(Image(buf.getvalue()))\n")
DRAW = ("import numpy as np\nx = np.linspace(0, 10, 200)\nplt.plot(x, np.sin(x), label='sin')\n"
        "plt.plot(x, np.cos(x), label='cos')\nplt.legend()\nplt.title('waves')\n"
        "plt.xlabel('x')\nplt.show()\n")


def measure(src: str) -> tuple[str, int, int]:
    """Ask once with one plot; return (size, base64 bytes, estimated tokens) of its image."""
    with FakeLLM() as fake, tempfile.TemporaryDirectory() as folder:
        fake.push(Turn("", tool_calls=[("run_python", {"code": src})]), Turn("done"))
        # A data dir of its own: no headless answer kept from (or for) another run.
        env = {**openai_env(fake), "JUPYTER_DATA_DIR": folder}
        nb = run_cells(["%%ask\nplot"], env, Path(folder))
        original = next(o for o in nb.cells[1].outputs if "image/png" in o.get("data", {}))
        raw = base64.b64decode(original["data"]["image/png"])
        with PILImage.open(io.BytesIO(raw)) as shown:
            print(f"  displayed: {shown.size[0]}x{shown.size[1]} px, {len(raw):,} bytes PNG")
        shrink("image/png", original["data"]["image/png"], 1024)  # Pillow imported
        started = time.perf_counter()
        shrink("image/png", original["data"]["image/png"], 1024)
        print(f"  downscale + re-encode: {(time.perf_counter() - started) * 1000:.0f} ms")
        url = image_parts(fake.requests[1].body)[0]["image_url"]["url"]
        data = url.split(",", 1)[1]
        with PILImage.open(io.BytesIO(base64.b64decode(data))) as sent:
            width, height = sent.size
        return f"{width}x{height}", len(data), image_tokens(width, height)


def main() -> None:
    """Print one line per plot."""
    sources = {name: f"import matplotlib.pyplot as plt\n{setup}\n{DRAW}"
               for name, setup in PLOTS.items()}
    draw = DRAW.replace("plt.show()\n", "")
    sources["1600x1200 PNG"] = "import matplotlib.pyplot as plt\n" + EXACT.format(draw=draw)
    for name, src in sources.items():
        print(name)
        size, b64, tokens = measure(src)
        print(f"  sent: {size} px, {b64:,} bytes of base64, ~{tokens:,} tokens (estimate)")


if __name__ == "__main__":
    main()
