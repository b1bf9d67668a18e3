"""Defaults shared by the index, search and the settings (kept import-light on purpose)."""

# Chosen on the two recall benchmarks (README, "Recall"): conversations keep a topic over
# several lines, so a larger chunk holds the evidence line with enough context to be found
# (bench/recall_dialogues.py hit@5 84% at 250, 91% at 400, 96% at 600, 90% at 800), while
# notes padded with unrelated lines lose a little (bench/recall.py 88% at 250, 82% at 600).
# 600 characters is about 150 tokens of English; dense Chinese can pass the local model's
# 512-token window (the tail is then found by the keyword legs only).
DEFAULT_CHUNK_CHARS = 600
DEFAULT_OVERLAP_LINES = 1
DEFAULT_HALF_LIFE_DAYS = 365.0
DEFAULT_MAX_RESULTS = 6
MAX_RESULTS = 50  # the most one search returns
