"""Start llama-cpp-python's OpenAI-compatible server with llama.cpp's extra (AMX/repack) weight buffers disabled.

Same command-line arguments as ``python -m llama_cpp.server``. Some VMs advertise AMX in CPUID but fault on
``ldtilecfg``: a ``-march=native`` build then dies with SIGSEGV on the first completion (seen on this project's
CI machines). scripts/e2e_llm.sh builds with ``GGML_NATIVE=OFF``, which avoids
AMX already; this launcher also protects a wheel that pip's cache may hold from an earlier native build.

Given ``--embedding`` (``true`` serves /v1/embeddings), it also makes mean pooling the default: the server has no
pooling option, and a causal model such as SmolLM2 otherwise gets llama.cpp's ``NONE`` pooling, for which
/v1/embeddings returns one vector per token (a list of lists, misaligned by llama-cpp-python 0.3.36) instead of
one vector per input.
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

from llama_cpp.server.__main__ import main  # noqa: E402  (imported after the patch, as in the verified recipe)

if __name__ == "__main__":
    main()
