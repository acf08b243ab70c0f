"""Start llama-cpp-python's OpenAI-compatible server with llama.cpp's extra (AMX/repack) weight buffers disabled.

Same command-line arguments as ``python -m llama_cpp.server``. Some VMs advertise AMX in CPUID but fault on
``ldtilecfg``: a ``-march=native`` build then dies with SIGSEGV on the first completion (seen on this project's
CI machines). scripts/e2e_llm.sh builds with ``GGML_NATIVE=OFF``, which avoids
AMX already; this launcher also protects a wheel that pip's cache may hold from an earlier native build.

Given ``--embedding`` (``true`` serves /v1/embeddings), it also makes mean pooling the default: the server has no
pooling option, and a causal model such as SmolLM2 otherwise gets llama.cpp's ``NONE`` pooling, for which
/v1/embeddings returns one vector per token (a list of lists, misaligned by llama-cpp-python 0.3.36) instead of
one vector per input.

It also makes the prompt log-probabilities of ``echo`` completions right for models without a BOS token (below).
"""

from __future__ import annotations

import sys

import llama_cpp.llama_cpp as lc

_default_params = lc.llama_model_default_params


def _params_without_extra_buffers():  # type: ignore[no-untyped-def]
    params = _default_params()
    params.use_extra_bufts = False
    return params


lc.llama_model_default_params = _params_without_extra_buffers

if "--embedding" in sys.argv:
    import llama_cpp

    _init = llama_cpp.Llama.__init__

    def _init_with_mean_pooling(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("pooling_type", lc.LLAMA_POOLING_TYPE_MEAN)
        _init(self, *args, **kwargs)

    llama_cpp.Llama.__init__ = _init_with_mean_pooling  # type: ignore[method-assign]

# Prompt log-probabilities (completions with ``echo`` and ``logprobs``: what GPTScore and perplexity read). For each
# echoed token llama-cpp-python 0.3.x reads the logits row at the token's own position, which is the distribution
# of the *next* token; it is right only when the prompt starts with a BOS token it strips (the rows are then one
# behind). A model that adds no BOS token, such as SmolLM2, gets every echoed logprob from the wrong row
# (abetlen/llama-cpp-python#1983). For those requests the prompt tokens' logprobs are recomputed from the row before
# each token, which the server keeps with logits_all (its default).
import llama_cpp  # noqa: E402
import numpy  # noqa: E402  (llama-cpp-python's own dependency)

_create_completion = llama_cpp.Llama._create_completion


def _echo_rows_off_by_one(llm, kwargs) -> bool:  # type: ignore[no-untyped-def]
    wanted = kwargs.get("echo") and kwargs.get("logprobs") is not None and not kwargs.get("stream")
    return bool(wanted) and llm._logits_all and not llm._model.add_bos_token()


def _realign(llm, logprobs, k):  # type: ignore[no-untyped-def]
    """Token i (i >= 1, a prompt token the model evaluated) scored by the row after token i - 1."""
    n = llm.n_tokens
    ids = llm.input_ids[:n].tolist()
    rows = llama_cpp.Llama.logits_to_logprobs(llm.scores[:n])
    for i in range(1, min(len(logprobs["tokens"]), n)):
        row = rows[i - 1]
        value = float(row[ids[i]])
        logprobs["token_logprobs"][i] = value
        best = numpy.argsort(row)[::-1][: max(k, 1)].tolist()
        top = {llm.detokenize([t], prev_tokens=ids[:i]).decode("utf-8", errors="ignore"): float(row[t]) for t in best}
        top[logprobs["tokens"][i]] = value
        logprobs["top_logprobs"][i] = top


def _create_completion_aligned(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    if not _echo_rows_off_by_one(self, kwargs):
        return (yield from _create_completion(self, *args, **kwargs))
    for completion in _create_completion(self, *args, **kwargs):
        logprobs = completion["choices"][0].get("logprobs")
        if logprobs:
            _realign(self, logprobs, kwargs["logprobs"])
        yield completion
    return None


llama_cpp.Llama._create_completion = _create_completion_aligned  # type: ignore[method-assign]

from llama_cpp.server.__main__ import main  # noqa: E402  (imported after the patch, as in the verified recipe)

if __name__ == "__main__":
    main()
