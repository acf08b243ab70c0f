"""Load time of a large generated cases.yaml: PyYAML's pure-Python ``safe_load`` against evaltrace's guarded loader.

Run: ``python benchmarks/bench_yaml_load.py`` (58 MiB, as in issue 13; ``--mib 5`` for a quick run,
``--skip-baseline`` to leave out ``yaml.safe_load``, which takes over a minute at 58 MiB). Prints seconds for:

- ``yaml.safe_load``: what ``evaltrace run`` used before (scanner, parser, composer, constructor in Python);
- ``yaml CSafeLoader``: libyaml without any guard (the floor);
- ``safe_yaml.load``: evaltrace's loader (libyaml events, guarded composer: depth, recursion, alias expansion);
- ``load_cases``: the whole of reading cases.yaml (decode, load, validate every case).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from evaltrace._internal import safe_yaml
from evaltrace.runner.config import load_cases

_CASE = """- id: case-{index:07d}
  input:
    question: "What is the refund policy for order {index}? Please answer in two sentences and cite the policy."
    context:
      - "Orders can be returned within 30 days of delivery for a full refund, shipping excluded."
      - "Digital goods are refundable only when the download was never started."
    user: {{tier: gold, locale: en-GB, attempts: {attempts}}}
  metadata:
    tags: [refunds, policy, smoke]
    source: support-tickets-2025
    difficulty: {difficulty}
  expected:
    answer_should_include: ["30 days", "refund"]
    answer_should_not_include: ["store credit"]
    must_call_tools: [lookup_order]
    facts: {{order_id: {index}, refundable: true}}
"""


def write_cases(path: Path, mib: float) -> int:
    """Write cases until the file reaches ``mib`` MiB; return how many."""
    target = int(mib * 1024 * 1024)
    size = count = 0
    with path.open("w", encoding="utf-8") as out:
        while size < target:
            chunk = "".join(
                _CASE.format(index=count + i, attempts=(count + i) % 5, difficulty=(count + i) % 3) for i in range(1000)
            )
            out.write(chunk)
            size += len(chunk.encode())
            count += 1000
    return count


def timed(label: str, load: Callable[[], Any]) -> None:
    start = time.perf_counter()
    load()
    print(f"{label:<20} {time.perf_counter() - start:8.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=float, default=58.0)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.yaml"
        count = write_cases(path, args.mib)
        print(f"{path.stat().st_size / 2**20:.1f} MiB, {count} cases, libyaml: {safe_yaml.WITH_LIBYAML}")
        text = path.read_text(encoding="utf-8")
        if not args.skip_baseline:
            timed("yaml.safe_load", lambda: yaml.safe_load(text))
        if safe_yaml.WITH_LIBYAML:
            timed("yaml CSafeLoader", lambda: yaml.load(text, Loader=yaml.CSafeLoader))
        timed("safe_yaml.load", lambda: safe_yaml.load(text))
        timed("load_cases", lambda: load_cases(path))


if __name__ == "__main__":
    main()
