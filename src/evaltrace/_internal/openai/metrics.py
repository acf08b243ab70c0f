"""The engine's GenAI client metrics, where the OpenAI instrumentation's callers have always imported them."""

from evaltrace._internal.engine.metrics import Instruments as Instruments
from evaltrace._internal.engine.metrics import MetricAttributes as MetricAttributes
