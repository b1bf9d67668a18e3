"""Photos for the model: does it take images, how large, and what that costs in tokens.

Each provider documents the size it works at, and anything larger is scaled down on its side
after being uploaded and paid for in bandwidth: Anthropic at most 1568 px on the long edge
and about 1.15 megapixels (about 1,600 tokens, width x height / 750); OpenAI fits an image
into 2048 x 2048, then its short side into 768 px, and counts 170 tokens per 512 px tile plus
85. So the image is resized here, once, with Pillow, and saved next to the original; the
resized copy is what every later model call sends.

Decoding is cheap because JPEG can be decoded at a half, quarter or eighth of its size
directly (`Image.draft`): a 12-megapixel phone photo never exists in memory at full size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

# Every image is re-encoded after resizing: JPEG, or PNG when it has transparency.
JPEG_QUALITY = 85
# A large picture is shrunk this many rows at a time (see _shrunk).
BAND_ROWS = 256
_EXIF_ORIENTATION = 0x0112


class ImageError(Exception):
    """The file is not an image we can use; `str()` says why, for the person."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """The resized copy the model sees, and what it came from."""

    path: Path
    media_type: str
    width: int
    height: int
    original_width: int
    original_height: int


def fitted_size(width: int, height: int, provider: str) -> tuple[int, int]:
    """The size the provider recommends for an image of `width` x `height` (never larger)."""
    if width <= 0 or height <= 0:
        return width, height
    if provider == "openai":
        scale = min(1.0, 2048 / max(width, height))
        scale *= min(1.0, 768 / (min(width, height) * scale))
    else:  # anthropic
        scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return max(1, int(width * scale)), max(1, int(height * scale))


def image_tokens(width: int, height: int, provider: str) -> int:
    """What an image of this (already fitted) size costs in prompt tokens, per the providers'
    published formulas (OpenAI's is for its `high` detail, the default for large images)."""
    if provider == "openai":
        return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)
    return math.ceil(width * height / 750)


def prepare_image(source: Path, dest: Path, provider: str, max_pixels: int) -> Prepared:
    """Resize `source` for `provider` into `dest` (its suffix is chosen here: .jpg or .png).

    Orientation from EXIF is applied, transparency kept (as PNG), animation reduced to the
    first frame. Raises ImageError for what is not an image, or one over `max_pixels`.
    """
    frame, width, height = _decoded(source, provider, max_pixels)
    alpha = frame.mode == "RGBA"
    if alpha:
        path, media_type = dest.with_suffix(".png"), "image/png"
        frame.save(path, "PNG")
    else:
        path, media_type = dest.with_suffix(".jpg"), "image/jpeg"
        frame.save(path, "JPEG", quality=JPEG_QUALITY)
    return Prepared(path, media_type, frame.size[0], frame.size[1], width, height)


def _decoded(source: Path, provider: str, max_pixels: int) -> tuple[Image.Image, int, int]:
    """The image upright, fitted, as RGB or RGBA; and its original width and height.

    Memory: the decoded picture is the only full-size copy there ever is (at most 4 bytes a
    pixel in Pillow; a JPEG is decoded straight at 1/2, 1/4 or 1/8 scale, so not even that).
    It is shrunk first, band by band (`_shrunk`), and only the small copy is turned upright:
    turning, converting and resizing the whole picture had made two or three more full-size
    copies (a 79 MP PNG took 900 MiB; bench/image_memory.py). Pillow is imported
    here, at the first image: the gateway starts without it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(source) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise ImageError(
                    f"the image is {width}x{height} pixels, more than the "
                    f"{max_pixels / 1e6:.0f} megapixels I open"
                )
            if image.format == "JPEG":  # decode at 1/2, 1/4 or 1/8 scale when that is enough
                image.draft("RGB", fitted_size(width, height, provider))
            image.seek(0)  # an animation: its first frame
            image.load()  # (a PNG's EXIF may come after its pixels)
            turn = _upright(image.getexif().get(_EXIF_ORIENTATION, 1))
            alpha = image.mode in ("RGBA", "LA", "PA") or (
                image.mode == "P" and "transparency" in image.info
            )
            mode = "RGBA" if alpha else "RGB"
            # fitted_size is symmetric in width and height: turning after fitting is the same
            fitted = fitted_size(*image.size, provider)
            frame = _shrunk(
                image,
                mode,
                max(1, int(min(image.size[0] / fitted[0], image.size[1] / fitted[1]) / 2)),
            )
            if frame.size != fitted:
                frame = frame.resize(fitted, Image.Resampling.BICUBIC)
            if turn is not None:
                frame = frame.transpose(turn)
            return frame, width, height
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError("the image is too large to open safely") from exc
    except UnidentifiedImageError as exc:
        raise ImageError(
            "this file is not an image format I can open (JPEG, PNG, WebP, GIF, BMP or TIFF)"
        ) from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageError("the image file is damaged or cut short") from exc


def _shrunk(image: Image.Image, mode: str, factor: int) -> Image.Image:
    """`image` in `mode` (RGB or RGBA), `factor` times smaller each way (a box filter),
    converted and reduced a band of rows at a time: each band is copied, converted and
    reduced on its own, so no second full-size copy is ever made (Pillow's own resize and
    convert of a whole RGBA or palette picture make one each)."""
    from PIL import Image

    width, height = image.size
    if factor <= 1:
        return image.convert(mode)
    out = Image.new(mode, (-(-width // factor), -(-height // factor)))
    rows = factor * max(1, BAND_ROWS // factor)  # whole blocks of `factor` rows per band
    for top in range(0, height, rows):
        band = image.crop((0, top, width, min(height, top + rows))).convert(mode)
        out.paste(band.reduce(factor), (0, top // factor))
    return out


def _upright(orientation: object) -> Image.Transpose | None:
    """The turn that puts an image with this EXIF orientation upright (None: it is)."""
    from PIL import Image

    turns = Image.Transpose
    by_orientation: dict[object, Image.Transpose] = {
        2: turns.FLIP_LEFT_RIGHT,
        3: turns.ROTATE_180,
        4: turns.FLIP_TOP_BOTTOM,
        5: turns.TRANSPOSE,
        6: turns.ROTATE_270,
        7: turns.TRANSVERSE,
        8: turns.ROTATE_90,
    }
    return by_orientation.get(orientation)


# --- which models take images ----------------------------------------------------------------

# OpenAI models with image input, and the names local vision models go by (Ollama, vLLM,
# LM Studio). Anything else on an OpenAI-compatible server is assumed to be text only; the
# `vision = "on"` setting says otherwise.
_OPENAI_VISION = re.compile(
    r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-4-vision|gpt-5|o1(?!-mini)|"
    r"o3(?!-mini)|o4)",
    re.IGNORECASE,
)
_LOCAL_VISION = re.compile(
    r"(llava|bakllava|vision|[-_.]vl\b|[-_.]vl[-_:.]|qwen\d?(\.\d)?-?vl|gemma-?3|gemma-?4|"
    r"pixtral|minicpm-v|moondream|llama-?4|mistral-small-3\.[1-9]|granite.*vision|internvl|"
    r"phi-?4-multimodal|kimi-vl|glm-4(\.\d)?v)",
    re.IGNORECASE,
)
# Claude models before the 3 family took no images.
_OLD_CLAUDE = re.compile(r"^claude-(instant|[12](\.\d)?)(-|$)", re.IGNORECASE)


def takes_images(setting: str, provider: str, model: str) -> bool:
    """Whether to send images to this model: `on`/`off` as set, `auto` from the name."""
    if setting in ("on", "off"):
        return setting == "on"
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o", "library/llava:13b"
    if provider == "anthropic":
        return not _OLD_CLAUDE.search(name)
    return bool(_OPENAI_VISION.search(name) or _LOCAL_VISION.search(name))


def media_type_of(name: str) -> str:
    """The media type a provider is told for a saved image file."""
    suffix = Path(name).suffix.lower()
    return {".png": "image/png", ".webp": "image/webp", ".gif": "image/gif"}.get(
        suffix, "image/jpeg"
    )


__all__ = [
    "ImageError",
    "Prepared",
    "fitted_size",
    "image_tokens",
    "media_type_of",
    "prepare_image",
    "takes_images",
]
