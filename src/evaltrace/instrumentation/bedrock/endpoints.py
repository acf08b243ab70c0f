"""The one wrapped method: every boto3 client's API calls go through ``BaseClient._make_api_call``.

Kept apart from the codec so that ``instrument()`` imports nothing of botocore or of the codec: the engine
patches ``botocore.client`` when it is imported and loads the codec with the first patch.
"""

from __future__ import annotations

from evaltrace._internal.engine.codec import Endpoint

ENDPOINTS = (Endpoint("botocore.client", "BaseClient", "_make_api_call", None, False),)
