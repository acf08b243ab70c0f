"""The LiteLLM functions traced (the table only: ``instrument_litellm()`` imports neither LiteLLM nor the codec).

``litellm.completion`` and ``litellm.acompletion`` are module functions: the package attributes are wrapped,
which is where applications (and LiteLLM's ``Router``) look them up. Code that ran ``from litellm import
completion`` before ``instrument_litellm()`` keeps the unwrapped function.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

COMPLETION = "completion"
ACOMPLETION = "acompletion"

ENDPOINTS = (
    Endpoint("litellm", None, "completion", COMPLETION, is_async=False),
    Endpoint("litellm", None, "acompletion", ACOMPLETION, is_async=True),
)
