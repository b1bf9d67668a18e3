"""Text handling shared by indexing and search: what goes into the word index, and queries.

The word index uses SQLite's `unicode61` tokenizer wrapped in `porter` (English suffixes
stripped, so "lessons" finds "lesson" and "moved" finds "moving": +7 points of BM25 hit@5 and
+3 of hybrid hit@5 on the recall benchmark's English questions; other scripts pass through
unchanged). unicode61 keeps a run of Chinese or Japanese
characters as one token. So before indexing, runs of CJK characters are rewritten as their
overlapping character bigrams ("数据库迁移" → "数据 据库 库迁 迁移"), and queries are rewritten
the same way: a 2-character query is then an exact token, and a longer one matches by its
bigrams. Beside it, a `trigram` index matches any substring of 3+ characters, which catches
identifiers (`CVE-2026-25253`, `10.0.3.17:8443`) exactly, punctuation included.

Queries are never "every word ANDed" (a natural question then matches almost nothing): the
content words are ORed and BM25 ranks documents that contain more, and rarer, of them first.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = [
    "STOPWORDS",
    "cjk_bigrams",
    "fts_phrase",
    "has_cjk",
    "index_text",
    "query_terms",
    "trigram_query",
    "word_query",
]

TOKENIZER_VERSION = "porter-unicode61-cjk2+trigram/2"

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul syllables
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# An identifier: word characters joined by punctuation (CVE-2026-25253, 10.0.3.17:8443,
# foo_bar.py, v1.2.3). Matched as an exact phrase and as a substring.
_IDENT = re.compile(r"[\w]+(?:[-_.:/@#][\w]+)+")

# Question words and glue that carry no topic. Kept small on purpose: BM25 already weighs
# common words down; this list only removes words that would pull in unrelated chunks.
_STOPWORDS_TEXT = """a an the and or but if of to in on at by for with from as is are was were
    be been being
    am do does did doing have has had having i me my we our us you your he she it its they them
    their this that these those what which who whom whose when where why how there here
    can could should would will shall may might must not no nor so than too very just about
    into over under again once any all each few more most other some such only own same
    s t don didn doesn isn wasn weren aren won hasn haven hadn
    tell remember recall know say said ask asked please ever also then up down out
    anything something thing things one get got"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# Chinese function words and question particles, removed from bigram expansion when a query
# bigram is made only of them.
_CJK_STOP = frozenset("的了吗呢吧啊是在和与我你他她它们这那哪什么怎么为谁几个有没")


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def cjk_bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """The text as the word index sees it: CJK runs replaced by their bigrams."""
    if not has_cjk(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group())) + " ", text)


def fts_phrase(term: str) -> str:
    """`term` as one FTS5 phrase (quoted, inner quotes doubled): never parsed as syntax."""
    return '"' + term.replace('"', '""') + '"'


def query_terms(query: str) -> tuple[list[str], list[str], list[str]]:
    """(words, cjk bigrams, identifiers) of a query, lowercased words, stopwords removed."""
    identifiers = [m.group() for m in _IDENT.finditer(query)]
    words: list[str] = []
    bigrams: list[str] = []
    for token in _WORD.findall(query):
        for part in _CJK_RUN.split(token):
            part = part.lower()
            if part and part not in STOPWORDS and part not in words:
                words.append(part)
        for run in _CJK_RUN.findall(token):
            for gram in cjk_bigrams(run):
                if gram not in bigrams and not all(ch in _CJK_STOP for ch in gram):
                    bigrams.append(gram)
    if not words and not bigrams:  # a query made only of stopwords: keep them
        words = [t.lower() for t in _WORD.findall(query) if not has_cjk(t)][:8]
    return words, bigrams, identifiers


def word_query(query: str, drop: Collection[str] = (), *, keep_some: bool = True) -> str:
    """An FTS5 MATCH expression for the word index: identifiers as phrases, terms ORed.

    `drop`: single words to leave out (too common to help); identifiers are never dropped.
    With `keep_some`, when every word would go and nothing else is left, the words are all
    kept; without, the expression may then be empty (no word leg).
    """
    words, bigrams, identifiers = query_terms(query)
    if drop:
        kept = [w for w in words if w not in drop]
        if kept or bigrams or not keep_some or any(len(_WORD.findall(i)) > 1 for i in identifiers):
            words = kept
    parts: list[str] = []
    for ident in identifiers:
        pieces = [p.lower() for p in _WORD.findall(ident)]
        if len(pieces) > 1:
            parts.append(fts_phrase(" ".join(pieces)))
    parts.extend(fts_phrase(w) for w in words)
    parts.extend(fts_phrase(b) for b in bigrams)
    return " OR ".join(parts)


def trigram_query(query: str) -> str:
    """An FTS5 MATCH expression for the trigram index, or "" when nothing is 3+ characters.

    Identifiers are matched whole (exact substring, punctuation included); CJK runs of 3+
    characters by their 3-character pieces, ORed.
    """
    parts: list[str] = []
    for ident in _IDENT.findall(query):
        if len(ident) >= 3:
            parts.append(fts_phrase(ident))
    for run in _CJK_RUN.findall(query):
        if len(run) >= 3:
            grams = {run[i : i + 3] for i in range(len(run) - 2)}
            parts.extend(fts_phrase(g) for g in sorted(grams))
    return " OR ".join(parts)
