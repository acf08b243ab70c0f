"""The few statistics the run analytics need, in pure Python (evaltrace does not depend on numpy or scipy).

- :func:`wilson_interval`: the Wilson score interval of a proportion. Unlike the normal ("Wald") interval it
  stays inside [0, 1] and is sensible for small samples and proportions near 0 or 1, which offline evals are.
- :func:`sign_test`: the exact two-sided binomial test of ``wins`` against ``losses`` under p = 0.5 (the sign
  test of paired comparisons; ties are left out by the caller).
- :func:`pearson`: the Pearson correlation of paired values.
- :func:`percentile`: a percentile with linear interpolation between the closest ranks (numpy's default).
- :func:`slope`: the least-squares slope of values over their index (the trend of a series of runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

__all__ = ["pearson", "percentile", "sign_test", "slope", "wilson_interval"]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes / n``.

    Args:
        successes: How many of the trials succeeded (0 <= successes <= n).
        n: How many trials.
        confidence: The interval's coverage, in (0, 1).

    Returns:
        ``(low, high)`` within [0, 1], or None when ``n`` is 0 (no proportion to bound).

    Raises:
        ValueError: The counts or the confidence are out of range.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got successes={successes}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided p-value of ``wins`` against ``losses`` when each side is equally likely.

    The probability, under Binomial(wins + losses, 0.5), of an outcome at least as far from an even split as the
    one seen. 1.0 when there is no comparison at all.

    Raises:
        ValueError: A count is negative.
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"sign_test needs counts >= 0, got wins={wins}, losses={losses}")
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    # P(X <= k) for X ~ Binomial(n, 1/2), doubled for the other tail; exact integers, then one division.
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, float(2 * tail / 2**n))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The Pearson correlation of paired values; None with fewer than 2 pairs or when a side is constant.

    Raises:
        ValueError: The sequences have different lengths.
    """
    if len(xs) != len(ys):
        raise ValueError(f"pearson needs paired values, got {len(xs)} and {len(ys)}")
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None  # a constant side has no correlation with anything
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values``, interpolating linearly; None for no values.

    Raises:
        ValueError: ``q`` is outside [0, 100].
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def slope(values: Sequence[float]) -> float | None:
    """The least-squares slope of ``values`` against 0, 1, 2, ...; None with fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    return sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values)) / sxx
