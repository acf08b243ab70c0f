"""The instrumentation engine (issue 26): one wrapper tower for every provider; each provider is a codec.

``codec``: what a provider implements (``Codec``, ``Endpoint``, ``Accumulator``); ``outcome``: what a response
contributes; ``instrumentor``: ``EngineInstrumentor``. ``wrappers``, ``call``, ``stream``, ``metrics`` and ``build``
are the engine itself. Nothing is imported here: ``import evaltrace`` stays cheap.
"""
