"""``LLMCall``: the engine's ``Call`` for the OpenAI codec (one traced OpenAI call)."""

from __future__ import annotations

import time  # noqa: F401  # tests patch ``call.time`` here; the clock read is engine.call's
from functools import partial
from typing import Any

from evaltrace._internal import deferred_attributes
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.call import error_type_of as error_type_of
from evaltrace._internal.openai import build
from evaltrace.instrumentation.openai.codec import CODEC


class LLMCall(Call):
    """The span of one OpenAI call (``chat {model}`` / ``embeddings {model}``); see ``engine.call.Call``."""

    __slots__ = ()
    codec = CODEC

    def _request_builder(self, params: dict[str, Any]) -> deferred_attributes.Builder:
        # ``build.request_attributes`` looked up per call, not bound once: a module attribute callers may replace.
        return partial(build.request_attributes, self.kind, params, self.capture, self.max_len)  # type: ignore[arg-type]
