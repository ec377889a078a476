"""Images a run displayed, made fit for the model: downscaled, re-encoded, capped and counted.

A chart goes back to the model so it can see what the user sees (an empty plot, labels on
top of each other). PNG and JPEG are downscaled to `max_side` and re-encoded as whichever is
smaller of a 256-colour PNG (lossless for most charts) and a JPEG; SVG cannot be rasterised
without a heavy dependency, so a small one goes as its source text. Pillow is imported on the
first image only.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_ci.agent.types import Image, Output
from jupyter_ci.wire.frozen import frozen

#: Display types sent as images, in order of preference when an output has several.
IMAGE_MIMES = ("image/png", "image/jpeg")
SVG_MIME = "image/svg+xml"
#: Longest SVG source, in characters, sent to the model as text.
MAX_SVG_CHARS = 4_000
JPEG_QUALITY = 85


@frozen
class Vision:
    """Whether and how a run's images reach the model in one ask."""

    enabled: bool = False
    #: Images one ask may send; later ones are noted as left out.
    max_images: int = 10
    #: Longest side, in pixels, an image is downscaled to.
    max_side: int = 1024


@dataclass
class Picked:
    """The images of one run for the model, and the note each image output gets in the text."""

    images: list[Image] = field(default_factory=list)
    #: Index of an output (in the sequence given to `pick`) -> the text that stands for it.
    notes: dict[int, str] = field(default_factory=dict)


def image_tokens(width: int, height: int) -> int:
    """Estimate the input tokens of an image, the larger of the providers' published rules."""
    # Anthropic: width * height / 750. OpenAI (detail high): 85 + 170 per 512-px tile after
    # scaling to fit 2048 px and then a shortest side of at most 768 px.
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    tiles = math.ceil(w * scale / 512) * math.ceil(h * scale / 512)
    return max(math.ceil(width * height / 750), 85 + 170 * tiles)


def shrink(mime: str, data: str, max_side: int) -> Image | None:
    """Decode a base64 image, downscale it to max_side and re-encode it compactly."""
    try:
        from PIL import Image as PILImage
    except ImportError:  # Pillow is a dependency; a broken install only costs the images
        return None
    try:
        raw = base64.b64decode(data)
        with PILImage.open(io.BytesIO(raw)) as opened:
            picture = _flatten(opened, PILImage)
    except (OSError, ValueError, binascii.Error, PILImage.DecompressionBombError):
        return None
    resized = max(picture.size) > max_side
    if resized:
        picture.thumbnail((max_side, max_side), PILImage.Resampling.LANCZOS)
    best_mime, best = _smallest(picture, PILImage)
    if not resized and mime in IMAGE_MIMES and len(raw) <= len(best):
        best_mime, best = mime, raw  # already as small as we can make it
    width, height = picture.size
    return Image(best_mime, base64.b64encode(best).decode("ascii"), width, height)


def _flatten(opened: Any, pil: Any) -> Any:
    """Return the image as RGB, transparent parts on white (as a notebook shows them)."""
    if opened.mode in ("RGBA", "LA", "P", "PA"):
        rgba = opened.convert("RGBA")
        alpha = rgba.getchannel("A")
        if alpha.getextrema() == (255, 255):  # matplotlib's figures: opaque, nothing to lay
            return rgba.convert("RGB")
        background = pil.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=alpha)
        return background
    return opened.convert("RGB")


def _smallest(picture: Any, pil: Any) -> tuple[str, bytes]:
    """Encode as a 256-colour PNG and as a JPEG; return the smaller."""
    png, jpeg = io.BytesIO(), io.BytesIO()
    # Charts have few colours: the octree palette keeps them exactly, and is fast. Not
    # `optimize`: it takes 5x longer for 5% fewer bytes, and tokens count pixels, not bytes.
    picture.quantize(256, method=pil.Quantize.FASTOCTREE).save(png, "PNG")
    picture.save(jpeg, "JPEG", quality=JPEG_QUALITY)
    # A photo is smaller as JPEG; a chart stays PNG unless JPEG is far smaller (sharp text).
    if len(jpeg.getvalue()) * 2 < len(png.getvalue()):
        return "image/jpeg", jpeg.getvalue()
    return "image/png", png.getvalue()


@dataclass
class ImagePicker:
    """Chooses the images of each run of one ask, within its cap and token budget."""

    vision: Vision
    #: Images sent so far in this ask.
    sent: int = 0

    def pick(self, outputs: Sequence[Output], tokens_left: int) -> Picked:
        """Take the images of these outputs in order; note each one that is left out."""
        picked = Picked()
        for index, output in enumerate(outputs):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            mime = next((m for m in (*IMAGE_MIMES, SVG_MIME) if m in data), None)
            if mime is not None:
                picked.notes[index] = self._one(mime, data[mime], picked, tokens_left)
        return picked

    def _one(self, mime: str, value: Any, picked: Picked, tokens_left: int) -> str:
        """Decide about one image; return the note that stands for it in the text."""
        shown = f"[{mime} image shown to the user"
        if not self.vision.enabled:
            return f"{shown}; not sent to you: vision is off]"
        text = "".join(value) if isinstance(value, list) else str(value)
        if mime == SVG_MIME:
            if len(text) <= MAX_SVG_CHARS:
                return f"{shown}; its SVG source:]\n{text.strip()}"
            return f"{shown}; not sent to you: an SVG too long to send as text]"
        if self.sent >= self.vision.max_images:
            cap = self.vision.max_images
            return (f"{shown}; not sent to you: this ask's limit of {cap} "
                    f"image{'s' * (cap != 1)} is reached]")
        image = shrink(mime, text, self.vision.max_side)
        if image is None:
            return f"{shown}; not sent to you: it could not be read]"
        cost = image_tokens(image.width, image.height)
        spent = sum(image_tokens(i.width, i.height) for i in picked.images)
        if cost > tokens_left - spent:
            return f"{shown}; not sent to you: it would not fit in the ask's token budget]"
        self.sent += 1
        picked.images.append(image)
        return f"{shown}, {image.width}x{image.height} px; attached for you to see]"
