"""Defaults shared by the index, search and the settings (kept import-light on purpose)."""

# Chosen on bench/recall.py (README, "Recall"): about one topic per chunk, and short enough
# that the local model embeds it quickly.
DEFAULT_CHUNK_CHARS = 250
DEFAULT_OVERLAP_LINES = 1
DEFAULT_HALF_LIFE_DAYS = 365.0
DEFAULT_MAX_RESULTS = 6
