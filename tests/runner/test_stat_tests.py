"""The pure-Python statistics behind the run analytics, against textbook values worked out by hand."""

from __future__ import annotations

import pytest

from evaltrace.runner.stat_tests import pearson, percentile, sign_test, slope, wilson_interval


def test_wilson_interval_matches_the_textbook_values() -> None:
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # never below 0, unlike Wald's
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    low, high = wilson_interval(5, 10, confidence=0.99) or (0.0, 0.0)
    assert low < 0.2366 and high > 0.7634  # wider at 99%
    assert wilson_interval(0, 0) is None


def test_sign_test_is_the_exact_two_sided_binomial() -> None:
    assert sign_test(9, 1) == pytest.approx(2 * (1 + 10) / 2**10)
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(5, 5) == 1.0 and sign_test(0, 0) == 1.0


def test_pearson_percentile_and_slope() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) is None and pearson([1], [2]) is None
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([7], 95) == 7 and percentile([], 95) is None
    assert slope([0.5, 0.6, 0.75]) == pytest.approx(0.125) and slope([1.0]) is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson_interval(11, 10), "0 <= successes <= n"),
        (lambda: wilson_interval(1, 10, confidence=1.0), "confidence must be in"),
        (lambda: sign_test(-1, 2), "counts >= 0"),
        (lambda: pearson([1, 2], [1]), "paired values"),
        (lambda: percentile([1], 101), r"\[0, 100\]"),
    ],
)
def test_bad_input_names_the_problem(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
