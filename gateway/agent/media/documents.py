"""Documents as text: PDFs (pypdf), and plain text of every common kind (Markdown, CSV, JSON,
source code, logs, subtitles ...).

What counts as readable is decided from the file name and the declared type before anything is
downloaded, so an unsupported file costs nothing but a clear reply. Extraction stops once
`max_chars` of text are in hand and says how much there was: a 900-page PDF yields its first
pages and the count, not a stalled turn. A file that says it is text but holds NUL bytes is
refused as binary.

A PDF is bounded whatever text it holds: at most `max_pages` pages, and no page is begun once
`seconds` have passed (a 78 KB PDF of 300 text-less pages that each draw nested forms took a
core for minutes). Between pages is not enough on its own, as one page can take as long as it
likes (pypdf caps form invocations per page, not the work they do), so the gateway runs this
in a child process that it kills at its deadline (`pdf_worker`, `workers.MediaWorkers`).
Whatever pypdf raises on a hostile file (`LimitReachedError` for a 3,000-deep page tree, parse
errors, recursion) is the same clear `DocumentError` as any unreadable PDF.
"""

from __future__ import annotations

import codecs
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypdf import PdfReader

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset(
    {
        ".txt",
        ".text",
        ".md",
        ".markdown",
        ".rst",
        ".org",
        ".adoc",
        ".tex",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".properties",
        ".xml",
        ".html",
        ".htm",
        ".svg",
        ".log",
        ".srt",
        ".vtt",
        ".diff",
        ".patch",
        ".py",
        ".pyi",
        ".ipynb",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".vue",
        ".svelte",
        ".css",
        ".scss",
        ".sass",
        ".less",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".groovy",
        ".gradle",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".m",
        ".mm",
        ".cs",
        ".fs",
        ".go",
        ".rs",
        ".rb",
        ".php",
        ".pl",
        ".pm",
        ".swift",
        ".dart",
        ".lua",
        ".r",
        ".jl",
        ".ex",
        ".exs",
        ".erl",
        ".hrl",
        ".hs",
        ".clj",
        ".cljs",
        ".elm",
        ".ml",
        ".mli",
        ".nim",
        ".zig",
        ".v",
        ".sql",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".bat",
        ".cmd",
        ".nix",
        ".tf",
        ".hcl",
        ".proto",
        ".graphql",
        ".gql",
        ".cmake",
        ".mk",
        ".dockerfile",
        ".gitignore",
        ".editorconfig",
    }
)
TEXT_NAMES = frozenset(
    {
        "dockerfile",
        "makefile",
        "readme",
        "license",
        "changelog",
        "gemfile",
        "rakefile",
        "procfile",
        "justfile",
    }
)
TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/x-sh",
    "application/javascript",
    "application/x-python",
    "application/sql",
)
PDF_TYPE = "application/pdf"


class DocumentError(Exception):
    """The document cannot be read; `str()` says why, for the person."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's text, at most the `max_chars` asked for; `total_chars` is how much there
    was (when it could be told without reading everything, else at least `len(text)`)."""

    text: str
    total_chars: int
    kind: str  # "pdf" | "text"
    pages: int = 0  # PDFs: pages in the file
    pages_read: int = 0  # PDFs: pages whose text is in `text`
    stopped: str = ""  # PDFs: "pages" or "time" when a limit ended the reading early

    @property
    def cut(self) -> bool:
        return self.total_chars > len(self.text) or self.pages_read < self.pages


def readable_kind(filename: str, mime: str) -> str | None:
    """ "pdf", "text", or None when this is no document we can read."""
    suffix = Path(filename).suffix.lower()
    mime = mime.split(";")[0].strip().lower()
    if suffix == ".pdf" or mime == PDF_TYPE:
        return "pdf"
    if suffix in TEXT_SUFFIXES or Path(filename).name.lower() in TEXT_NAMES:
        return "text"
    if mime.startswith(TEXT_TYPES):
        return "text"
    return None


def extract(
    path: Path, kind: str, max_chars: int, *, max_pages: int = 1000, seconds: float = 30.0
) -> Extracted:
    """The text of a saved document, read here (a text file in a worker thread; a PDF in a
    child process the caller can kill: see `pdf_worker`)."""
    if kind == "pdf":
        return pdf_text(path, max_chars, max_pages, seconds)
    return _text(path, max_chars)


def _text(path: Path, max_chars: int) -> Extracted:
    size = path.stat().st_size
    with open(path, "rb") as handle:
        # At most 4 bytes a character: this many bytes always hold max_chars characters.
        data = handle.read(max_chars * 4 + 4)
    if b"\x00" in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DocumentError("it looks like a binary file, not text")
    text = _decode(data, cut=size > len(data))
    if len(text) > max_chars:
        total = max(len(text), size // 4)  # a lower bound: the rest was not decoded
        return Extracted(text[:max_chars], total, "text")
    # Everything fitted; a file cut while reading has at least this many characters more.
    total = len(text) + (size - len(data)) // 4 if size > len(data) else len(text)
    return Extracted(text, total, "text")


def _decode(data: bytes, *, cut: bool) -> str:
    """UTF-8 (with or without a BOM), UTF-16 with a BOM, else Windows-1252: the encodings
    text files people send are in. A cut-off multi-byte character at the end is dropped."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        return decoder.decode(data, final=not cut)
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def pdf_text(
    path: Path,
    max_chars: int,
    max_pages: int,
    seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> Extracted:
    """A PDF's text: pages in order until `max_chars` characters, `max_pages` pages or
    `seconds` (checked before each page) are reached. Raises DocumentError."""
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    deadline = clock() + seconds
    parts: list[str] = []
    read = pages = 0
    stopped = ""
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not _opens_without_password(reader):
            raise DocumentError("the PDF is password-protected")
        pages = len(reader.pages)
        used = 0
        for page in reader.pages:
            if used >= max_chars:
                break
            if read >= max_pages or clock() >= deadline:
                stopped = "pages" if read >= max_pages else "time"
                break
            try:
                text = page.extract_text() or ""
            except RecursionError:
                raise
            except Exception:  # one broken page must not lose the others
                log.info("a PDF page could not be read; skipped")
                text = ""
            read += 1
            parts.append(text.strip())
            used += len(parts[-1]) + 2
    except DocumentError:
        raise
    except FileNotDecryptedError as exc:
        raise DocumentError("the PDF is password-protected") from exc
    except Exception as exc:  # hostile input: pypdf's limits, parse errors, recursion ...
        log.info("an unreadable PDF: %s", type(exc).__name__)
        raise DocumentError("the PDF is damaged or not really a PDF") from exc
    text = "\n\n".join(p for p in parts if p)
    if not text.strip():
        if stopped:
            raise DocumentError(
                f"I found no text in the first {read} of its {pages} pages, as much as I read "
                "of one document (it is probably scanned images, or drawn in a way that is "
                "too slow to read)"
            )
        raise DocumentError(
            f"the PDF ({pages} page{'s' if pages != 1 else ''}) has no text "
            "layer: it is probably scanned images"
        )
    total = len(text) if read == pages else max(len(text), int(len(text) * pages / read))
    return Extracted(text[:max_chars], total, "pdf", pages, read, stopped)


def _opens_without_password(reader: PdfReader) -> bool:
    """Many "protected" PDFs open with the empty password (AES ones need `cryptography`)."""
    from pypdf import PasswordType

    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:
        return False
