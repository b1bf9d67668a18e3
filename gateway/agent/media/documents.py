"""Documents as text: PDFs (pypdf), and plain text of every common kind (Markdown, CSV, JSON,
source code, logs, subtitles ...).

What counts as readable is decided from the file name and the declared type before anything is
downloaded, so an unsupported file costs nothing but a clear reply. Extraction stops once
`max_chars` of text are in hand and says how much there was: a 900-page PDF yields its first
pages and the count, not a stalled turn. A file that says it is text but holds NUL bytes is
refused as binary.
"""

from __future__ import annotations

import codecs
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypdf import PdfReader

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({
    ".txt", ".text", ".md", ".markdown", ".rst", ".org", ".adoc", ".tex", ".csv", ".tsv",
    ".json", ".jsonl", ".ndjson", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".env",
    ".properties", ".xml", ".html", ".htm", ".svg", ".log", ".srt", ".vtt", ".diff", ".patch",
    ".py", ".pyi", ".ipynb", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".vue", ".svelte",
    ".css", ".scss", ".sass", ".less", ".java", ".kt", ".kts", ".scala", ".groovy", ".gradle",
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".m", ".mm", ".cs", ".fs", ".go", ".rs",
    ".rb", ".php", ".pl", ".pm", ".swift", ".dart", ".lua", ".r", ".jl", ".ex", ".exs", ".erl",
    ".hrl", ".hs", ".clj", ".cljs", ".elm", ".ml", ".mli", ".nim", ".zig", ".v", ".sql",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".nix", ".tf", ".hcl", ".proto",
    ".graphql", ".gql", ".cmake", ".mk", ".dockerfile", ".gitignore", ".editorconfig",
})
TEXT_NAMES = frozenset({"dockerfile", "makefile", "readme", "license", "changelog",
                        "gemfile", "rakefile", "procfile", "justfile"})
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml",
              "application/yaml", "application/toml", "application/x-sh",
              "application/javascript", "application/x-python", "application/sql")
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

    @property
    def cut(self) -> bool:
        return self.total_chars > len(self.text) or self.pages_read < self.pages


def readable_kind(filename: str, mime: str) -> str | None:
    """"pdf", "text", or None when this is no document we can read."""
    suffix = Path(filename).suffix.lower()
    mime = mime.split(";")[0].strip().lower()
    if suffix == ".pdf" or mime == PDF_TYPE:
        return "pdf"
    if suffix in TEXT_SUFFIXES or Path(filename).name.lower() in TEXT_NAMES:
        return "text"
    if mime.startswith(TEXT_TYPES):
        return "text"
    return None


def extract(path: Path, kind: str, max_chars: int) -> Extracted:
    """The text of a saved document (call in a worker thread: PDFs take a while)."""
    if kind == "pdf":
        return _pdf(path, max_chars)
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


def _pdf(path: Path, max_chars: int) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not _opens_without_password(reader):
            raise DocumentError("the PDF is password-protected")
        pages = len(reader.pages)
        parts: list[str] = []
        used = 0
        read = 0
        for page in reader.pages:
            if used >= max_chars:
                break
            try:
                text = page.extract_text() or ""
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
    except (PdfReadError, OSError, ValueError, KeyError, TypeError) as exc:
        raise DocumentError("the PDF is damaged or not really a PDF") from exc
    text = "\n\n".join(p for p in parts if p)
    if not text.strip():
        raise DocumentError(f"the PDF ({pages} page{'s' if pages != 1 else ''}) has no text "
                            "layer: it is probably scanned images")
    total = len(text) if read == pages else max(len(text), int(len(text) * pages / read))
    return Extracted(text[:max_chars], total, "pdf", pages, read)


def _opens_without_password(reader: PdfReader) -> bool:
    """Many "protected" PDFs open with the empty password (AES ones need `cryptography`)."""
    from pypdf import PasswordType

    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:
        return False
