"""Standing instructions: the rules a person sets in chat, kept in INSTRUCTIONS.md.

"Don't delete anything until I confirm" said once has to hold for the rest of the person's
life with the assistant, not until the next compaction. So the rule is written, in the
person's own words, to INSTRUCTIONS.md (memory.layout), a private file every private prompt
loads (DM turns, the memory flush, heartbeats), with where and when it was said:

    - Don't delete anything until I confirm. (said 2026-12-06, telegram DM)

This module is the cheap, model-free half: a detector that decides whether a message may
hold such a rule (so "hello" never costs a model call), the check that a rule a model
extracted really is the person's wording, and the file format. The model step that extracts
the rule lives in gateway/agent/instructions.py. The patterns cover English, German, French,
Spanish, Italian, Portuguese and Dutch; a rule said in another language is not noticed by the
detector (the person can write it into INSTRUCTIONS.md by hand, or say it in one of these).
Words that also mean "still" ("immer noch", "toujours là") or "ever" ("mai visto") make the
detector fire more often than a rule is said: the cost of a false alarm is one short call on
the background model, the cost of a miss is a rule that evaporates.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memory.corrections import is_struck

__all__ = [
    "Instruction",
    "add_instructions",
    "grounded",
    "looks_like_instruction",
    "normalize",
    "parse_instructions",
    "said_in",
]

MAX_INSTRUCTION_CHARS = 300  # a longer "rule" is a paragraph, not a rule
GROUNDED_SHARE = 0.8  # of a rule's words that must be in what the person wrote

_VERBS = (
    r"(?:delete|remove|erase|send|message|e-?mail|text|call|ping|notify|wake|book|buy|"
    r"order|pay|post|publish|share|forward|change|touch|move|run|use|reply|answer|respond|"
    r"act|do|schedule|cancel|contact|spend|sign|write|edit|mention|bring up|tell|talk|"
    r"use|swear|translate|speak|suggest|recommend)"
)
_PATTERNS = [
    # "never delete ...", "don't message me before 9", "do not pay ...", "stop sending ..."
    rf"\b(?:never|don'?t|do not|dont|stop|no longer|please don'?t)\s+(?:\w+\s+){{0,2}}?{_VERBS}",
    # "always answer in German", "from now on ...", "whenever I ...", "every time ..."
    r"\b(?:always|from now on|going forward|in (?:the )?future|from today|henceforth|"
    r"whenever|every time|each time)\b",
    # "until I confirm", "unless I say so", "without asking me", "without my ok"
    r"\b(?:until|unless|till)\s+i\s+(?:confirm|say|approve|tell|agree|ok|okay|check|give)",
    r"\bwithout\s+(?:asking|checking|confirming|telling)\b",
    r"\bwithout\s+my\s+(?:ok|okay|approval|confirmation|permission|consent|go-ahead)\b",
    # "only in English", "only after 9", "not before 9", "no messages after 10 pm"
    r"\b(?:not|never|only|no \w+)\s+(?:before|after)\s+\d{1,2}(?::\d\d)?\b",
    r"\b(?:make sure (?:you|to)|remember to|i want you to|you must|you should)\s+"
    r"(?:always|never|not)\b",
]
# The same shapes in the other languages the gateway's word lists know: "never/always",
# "from now on", "without asking me", "until I confirm", "not before 9".
_OTHER_LANGUAGES = [
    # German: "lösch nie etwas ohne mich zu fragen", "antworte immer auf Deutsch",
    # "ab sofort ...", "schreib mir nicht vor 9"; "immer noch"/"noch immer" mean "still".
    r"\b(?:nie|niemals|ab jetzt|ab sofort|von nun an|von jetzt an|künftig|zukünftig|"
    r"in zukunft|jedes mal|jedesmal)\b",
    r"(?<!noch )\bimmer\b(?! noch)",
    r"\bohne\s+(?:\w+\s+){0,2}?(?:zu\s+)?(?:fragen|nachzufragen|rückfrage|bestätigung|"
    r"erlaubnis|zustimmung|mein okay|mein ok)",
    r"\b(?:bis|solange)\s+ich\s+(?:\w+\s+)?(?:bestätige|sage|erlaube|zustimme|freigebe)",
    r"\b(?:nicht|nie|nur)\s+(?:vor|nach)\s+\d{1,2}(?::\d\d)?\b",
    # French: "ne supprime jamais rien sans me demander", "réponds toujours en anglais",
    # "désormais ...", "pas avant 9h"
    r"\b(?:jamais|toujours|désormais|dorénavant|à l'avenir|à partir de maintenant|"
    r"chaque fois que)\b",
    r"\bsans\s+(?:me\s+|m')?(?:demander|consulter|prévenir|confirmation|mon accord|"
    r"ma permission|mon feu vert)",
    r"\b(?:jusqu'à ce que|tant que)\s+(?:je|j')\s*(?:ne\s+)?(?:\w+\s+)?(?:confirme|dise|"
    r"valide|approuve|donne)",
    r"\b(?:pas|jamais|seulement|uniquement)\b[^.?!\n]{0,40}?\b(?:avant|après)\s+\d{1,2}\s*(?:h|:\d\d)?",
    # Spanish: "nunca borres nada sin preguntarme", "responde siempre en inglés"
    r"\b(?:nunca|jamás|siempre|de ahora en adelante|a partir de ahora|en adelante|"
    r"cada vez que)\b",
    r"\bsin\s+(?:preguntar|consultar|avisar|confirmar|mi permiso|mi autorización|"
    r"mi confirmación|mi visto bueno)",
    r"\bhasta\s+que\s+(?:yo\s+)?(?:lo\s+)?(?:confirme|diga|apruebe|autorice)",
    r"\b(?:no|nunca|solo|sólo)\b[^.?!\n]{0,40}?\b(?:antes|después)\s+de\s+las\s+\d{1,2}",
    # Italian: "non cancellare mai niente senza chiedermi", "rispondi sempre in inglese"
    r"\b(?:mai|sempre|d'ora in poi|da ora in poi|da adesso in poi|ogni volta che)\b",
    r"\bsenza\s+(?:chieder|consultar|avvisar|confermar|il mio (?:permesso|consenso|ok))",
    r"\bfinché\s+non\s+(?:lo\s+)?(?:confermo|dico|approvo|autorizzo)",
    r"\b(?:non|mai|solo)\b[^.?!\n]{0,40}?\b(?:prima delle|dopo le)\s+\d{1,2}",
    # Portuguese: "nunca apague nada sem me perguntar", "responda sempre em inglês"
    r"\b(?:jamais|de agora em diante|a partir de agora|daqui para a frente|toda vez que|"
    r"sempre que)\b",
    r"\bsem\s+(?:me\s+)?(?:perguntar|consultar|avisar|confirmar|minha permissão|"
    r"minha autorização|minha confirmação)",
    r"\baté\s+(?:que\s+)?eu\s+(?:\w+\s+)?(?:confirme|confirmar|diga|disser|aprove|aprovar)",
    r"\b(?:não|nunca|só|somente)\b[^.?!\n]{0,40}?\b(?:antes|depois)\s+das\s+\d{1,2}",
    # Dutch: "verwijder nooit iets zonder het te vragen", "antwoord altijd in het Engels"
    r"\b(?:nooit|altijd|voortaan|vanaf nu|in de toekomst|elke keer)\b",
    r"\bzonder\s+(?:\w+\s+){0,3}?(?:te\s+)?(?:vragen|overleg|toestemming|bevestiging)",
    r"\btotdat\s+ik\s+(?:het\s+)?(?:bevestig|zeg|goedkeur)",
    r"\b(?:niet|nooit|alleen)\s+(?:voor|na)\s+\d{1,2}(?::\d\d)?\s*(?:uur)?\b",
]
DETECTOR = re.compile("|".join(f"(?:{p})" for p in [*_PATTERNS, *_OTHER_LANGUAGES]), re.IGNORECASE)
_PROVENANCE = re.compile(r"\s*\((?:said|kept) [^()]*\)\s*$")
_MARKER = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)")


@dataclass(frozen=True, slots=True)
class Instruction:
    text: str  # the rule, without its provenance
    provenance: str  # "said 2026-12-06, telegram DM", or "" for a line written by hand
    struck: bool  # retired by hand (`~~rule~~`)


def looks_like_instruction(message: str) -> bool:
    """Might `message` set a standing rule? Cheap: one regular expression, no model."""
    return bool(DETECTOR.search(message[:4000]))


def normalize(text: str) -> str:
    """For comparing rules: case, spacing, curly quotes and end punctuation do not count."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.casefold().split()).strip(" .!;:,")


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", normalize(text))


def grounded(rule: str, said: str) -> bool:
    """Are (nearly) all of the rule's words the person's own? A model asked to copy the rule
    may add a word or fix a typo, not invent one; a rule that is not in what the person wrote
    (text from a web page, a model's own idea) is never written."""
    words = _words(rule)
    if not words or len(rule) > MAX_INSTRUCTION_CHARS:
        return False
    pool = set(_words(said))
    return sum(1 for word in words if word in pool) >= GROUNDED_SHARE * len(words)


def said_in(rule: str, text: str) -> bool:
    """Is the rule (normalized) written in `text`?"""
    needle = normalize(rule)
    return bool(needle) and needle in normalize(text)


def parse_instructions(text: str) -> list[Instruction]:
    """The rules of INSTRUCTIONS.md: every list item (headings, comments and prose are not
    rules; a hand-written line without provenance is one)."""
    found: list[Instruction] = []
    for line in text.splitlines():
        if not _MARKER.match(line):
            continue
        struck = is_struck(line)
        body = _MARKER.sub("", line, count=1).strip()
        provenance = ""
        match = _PROVENANCE.search(body)
        if match:
            provenance = match.group(0).strip()[1:-1]
            body = body[: match.start()].rstrip()
        body = body.replace("~~", "").strip() if struck else body
        if body:
            found.append(Instruction(body, provenance, struck))
    return found


def add_instructions(text: str, rules: list[str], provenance: str) -> tuple[str, list[str]]:
    """(INSTRUCTIONS.md with the rules appended, the rules that were new). A rule already in
    the file (retired ones included, compared normalized) is not written twice."""
    known = {normalize(item.text) for item in parse_instructions(text)}
    added: list[str] = []
    for rule in rules:
        clean = " ".join(rule.split())
        key = normalize(clean)
        if not key or key in known:
            continue
        known.add(key)
        added.append(clean)
    if not added:
        return text, []
    base = text if not text or text.endswith("\n") else text + "\n"  # no heading: the
    # prompt names the file, and every token of it is in every private request
    lines = "".join(f"- {rule} ({provenance})\n" for rule in added)
    return base + lines, added
