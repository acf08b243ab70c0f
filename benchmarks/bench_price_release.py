"""Start-up under a genai-prices release evaltrace ships no price index for (issue 28's ``startup`` row, whole process).

Run: python benchmarks/bench_price_release.py [--runs 2]

``smoke.py``'s ``startup`` row runs with the installed genai-prices, the release evaltrace's shipped index
(``_internal/price_index_data``) was built from. This runs the same children (``bench_openai_pipeline.py``
``none:first``, ``official:first``, ``evaltrace:first``: set-up, one call, flush; callgrind, all threads, from the
interpreter's start, ``PYTHONHASHSEED=0``, bytecode cached) with a copy of the installed genai-prices whose record
names release 9.9.9 first on ``PYTHONPATH``, and evaltrace's price cache folder (``EVALTRACE_PRICE_CACHE``) in three
states, beside the price cache turned off:

- ``direct``: ``EVALTRACE_PRICE_CACHE=off``: nothing is read, built or kept, every price is genai-prices' own lookup
  (what the first process costs at best: it loads genai-prices' table too);
- ``cold``: an empty folder (the first process under that release: it builds the index of the provider it prices);
- ``index``: only what a first process left there besides the file of prices already looked up (the index built at
  run time, ``price_index_local``), as a later process asked for a model no earlier one priced finds it;
- ``warm``: everything a first process left (the file of prices already looked up, too).

The ratio is ``smoke.py``'s: (evaltrace - none) / (official - none).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _callgrind

PIPELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_openai_pipeline.py")
RELEASE = "9.9.9"


def _release_copy(site: Path) -> None:
    """The installed genai-prices, its record renamed to ``RELEASE`` (a release no shipped index is for)."""
    from importlib.util import find_spec

    spec = find_spec("genai_prices")
    assert spec is not None and spec.submodule_search_locations
    installed = Path(next(iter(spec.submodule_search_locations)))
    shutil.copytree(installed, site / "genai_prices", ignore=shutil.ignore_patterns("__pycache__"))
    record = site / f"genai_prices-{RELEASE}.dist-info"
    shutil.copytree(installed.parent / f"genai_prices-{version('genai-prices')}.dist-info", record)
    metadata = record / "METADATA"
    text = metadata.read_text(encoding="utf-8").replace(
        f"\nVersion: {version('genai-prices')}\n", f"\nVersion: {RELEASE}\n"
    )
    metadata.write_text(text, encoding="utf-8")


def _total(variant: str, cache: Path | str | None) -> int:
    if cache is not None:
        os.environ["EVALTRACE_PRICE_CACHE"] = cache if isinstance(cache, str) else f"{cache}/"
    return sum(_callgrind.run_totals(PIPELINE, variant, 0).values())


def main() -> None:
    """Print each run's totals and the start-up ratio with the cache off and in the three states of its folder."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="price-release-"))
    try:
        _release_copy(work / "site")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "site"), os.environ.get("PYTHONPATH")]))
        os.environ["EVALTRACE_PRICE_CACHE"] = f"{work / 'warm-up'}/"
        _callgrind.warm([(PIPELINE, v) for v in ("none:first", "official:first", "evaltrace:first")])
        for run in range(1, args.runs + 1):
            none = _total("none:first", None)
            official = _total("official:first", None)
            folders = {state: work / f"{state}-{run}" for state in ("cold", "index", "warm")}
            totals = {"direct": _total("evaltrace:first", "off")}
            totals["cold"] = _total("evaltrace:first", folders["cold"])  # leaves what a first process leaves
            shutil.copytree(folders["cold"], folders["warm"])
            folders["index"].mkdir()
            for entry in folders["cold"].iterdir():
                if entry.is_dir():  # the index built at run time; not the file of prices already looked up
                    shutil.copytree(entry, folders["index"] / entry.name)
            totals["index"] = _total("evaltrace:first", folders["index"])
            totals["warm"] = _total("evaltrace:first", folders["warm"])
            print(
                f"run {run}: none {none / 1e6:,.1f}M, official {official / 1e6:,.1f}M (+{(official - none) / 1e6:,.1f}M)"
            )
            for state, total in totals.items():
                ratio = (total - none) / (official - none)
                print(f"  evaltrace {state:6}: {total / 1e6:,.1f}M (+{(total - none) / 1e6:,.1f}M) {ratio:.2f}x")
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
