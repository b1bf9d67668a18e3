"""Which characters make a name read differently from what it is, and the one way a name
someone else chose is quoted back in the gateway's own words.

A file name comes from whoever sent the file (or from the model): "invoice\\u202egpj.pdf"
shows as "invoicefdp.jpg", an ESC sequence recolours or clears a terminal, a newline forges a
second line of the reply. `paths` refuses such names as paths; `shown_name` makes any name
safe to quote on one line (media replies, the notes the model gets about saved files,
send_file's answers): each such character becomes U+FFFD, visible for what it is.
"""

from __future__ import annotations

import unicodedata

# Cc: C0/C1 controls (NUL, newline, ESC...); Cs: lone surrogates, which cannot name a real UTF-8
# file; Zl/Zp: line/paragraph separators, which would break the one-path-per-line tool output.
BAD_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
# Bidirectional controls (embeddings, overrides, isolates, marks): "invoice\u202egpj.md" shows
# as "invoicedm.jpg". Other format characters (joiners in emoji and Persian) stay allowed.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
REPLACEMENT = "\ufffd"


def misleading(ch: str) -> bool:
    """Whether `ch` is a control, a lone surrogate, a line break or a bidirectional control."""
    return ch in BIDI_CONTROLS or unicodedata.category(ch) in BAD_CATEGORIES


def shown_name(name: str, limit: int = 80) -> str:
    """`name` as it may be quoted in a reply: runs of spaces, tabs and newlines become one
    space, every other misleading character U+FFFD, at most `limit` characters (then "...").
    Empty when nothing is left."""
    flat = " ".join(name.split())
    shown = "".join(REPLACEMENT if misleading(ch) else ch for ch in flat)
    return shown if len(shown) <= limit else shown[: limit - 3].rstrip() + "..."
