"""``run --shard i/N`` and ``runs merge``: shards any launcher can run, merged into one run's results and summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaltrace.cli import main
from evaltrace.runner import RunDirectory, resume_run, run_eval
from evaltrace.runner.merge import merge_runs
from evaltrace.runner.rundir import RESULTS_FILE, SUMMARY_FILE, TRACES_FILE
from evaltrace.runner.shards import ShardError, ShardSpec, parse_shard, shard_cells
from run_report_project import forget, write_project

# Differ between any two runs of the same cells (ids, clocks, durations): everything else must be equal.
_RANDOM = {
    "evaluation_id",
    "trace_id",
    "span_id",
    "parent_span_id",
    "run_id",
    "started_at",
    "finished_at",
    "ended_at",
    "timestamp",
}
_TIMING = ("duration", "latency", "_ms", "_at", "fastest", "slowest")  # fastest/slowest_variant: timings


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        if isinstance(value.get("explanations"), list):  # the slowest variant's sentence gives its latency
            value = {**value, "explanations": [e for e in value["explanations"] if "ms per case" not in e]}
        return {k: _clean(v) for k, v in value.items() if k not in _RANDOM and not any(t in k for t in _TIMING)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _results(run: Path) -> list[Any]:
    lines = (run / RESULTS_FILE).read_text(encoding="utf-8").splitlines()
    return sorted((_clean(json.loads(line)) for line in lines), key=lambda r: json.dumps(r, sort_keys=True))


def _summary(run: Path) -> Any:
    data = yaml.safe_load((run / SUMMARY_FILE).read_text(encoding="utf-8"))
    # Which line of traces.jsonl holds a cell follows the order cells finished in: a pointer, not a finding.
    return json.loads(json.dumps(_clean(data)).replace(str(run), "RUN"), object_hook=_no_lines)


def _no_lines(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in {"trace_line", "line", "location"}}


@pytest.fixture
def eval_path(tmp_path: Path) -> Any:
    path, _ = write_project(tmp_path / "project")
    yield path
    forget(tmp_path / "project")


def test_shards_are_deterministic_disjoint_and_cover_every_cell() -> None:
    cells = [(f"case{i}", v) for i in range(7) for v in ("a", "b")]
    slices = [shard_cells(cells, ShardSpec(index=i, count=3)) for i in (1, 2, 3)]
    assert set().union(*slices) == set(cells)
    assert sum(len(s) for s in slices) == len(cells)  # disjoint
    assert sorted(len(s) for s in slices) == [4, 5, 5]  # dealt round-robin: balanced
    assert shard_cells(reversed(cells), ShardSpec(index=2, count=3)) == slices[1]  # input order does not matter
    # No hash(): the same slice under any PYTHONHASHSEED, i.e. on every machine of a CI matrix.
    code = (
        "from evaltrace.runner.shards import ShardSpec, shard_cells;"
        f"print(sorted(shard_cells({cells!r}, ShardSpec(index=2, count=3))))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == str(sorted(slices[1]))


@pytest.mark.parametrize("text", ["3", "0/3", "4/3", "a/3", "1/0", "-1/3"])
def test_malformed_shard_is_a_clear_error(text: str) -> None:
    with pytest.raises(ShardError, match="--shard"):
        parse_shard(text)


def test_three_shards_merged_equal_one_process_run(tmp_path: Path, eval_path: Path, capsys: Any) -> None:
    whole = run_eval(eval_path, runs_dir=tmp_path / "whole").run.path
    runs_dir = tmp_path / "shards"
    shard_dirs = []
    for i in (1, 2, 3):
        assert main(["run", str(eval_path), "--shard", f"{i}/3", "--runs-dir", str(runs_dir), "--no-progress"]) == 0
        shard_dirs.append(max(runs_dir.iterdir(), key=lambda p: p.stat().st_mtime_ns))
    assert len(set(shard_dirs)) == 3
    metas = [RunDirectory(d).read_meta() for d in shard_dirs]
    assert [m.shard for m in metas if m is not None] == [ShardSpec(index=i, count=3) for i in (1, 2, 3)]
    sizes = [len((d / TRACES_FILE).read_text().splitlines()) for d in shard_dirs]
    assert sorted(sizes) == [3, 3, 4]  # 10 cells: each ran only its own

    out = tmp_path / "merged"
    project = eval_path.parent
    project.rename(tmp_path / "elsewhere")  # a CI merge job: neither the eval.yaml nor the project's code is there
    try:
        assert main(["runs", "merge", *map(str, reversed(shard_dirs)), "--out", str(out)]) == 0
    finally:
        (tmp_path / "elsewhere").rename(project)
    assert _results(out) == _results(whole)
    assert _summary(out) == _summary(whole)
    merged_summary = yaml.safe_load((out / SUMMARY_FILE).read_text())
    assert merged_summary["comparison"] is not None  # the baseline comparison and its findings, as one run's
    assert RunDirectory(out).read_meta().shard is None  # type: ignore[union-attr]
    capsys.readouterr()
    assert main(["report", str(out), "--output", str(tmp_path / "report.html")]) == 0


def test_shard_resumes_as_its_shard(tmp_path: Path, eval_path: Path) -> None:
    shard = ShardSpec(index=2, count=3)
    run = run_eval(eval_path, runs_dir=tmp_path / "runs", shard=shard).run
    traces = (run.path / TRACES_FILE).read_text().splitlines()
    # A killed shard: its last cell and every result and the summary lost.
    (run.path / TRACES_FILE).chmod(0o600)
    (run.path / TRACES_FILE).write_text("\n".join(traces[:-1]) + "\n")
    (run.path / RESULTS_FILE).unlink()
    (run.path / SUMMARY_FILE).unlink()
    outcome = resume_run(run, sqlite_path=tmp_path / "runs.db")
    assert not outcome.stored and not (tmp_path / "runs.db").exists()  # a partial run is never stored
    assert any("runs merge" in note for note in outcome.notes)
    cells = {(t.case_id, t.variant_name) for t in outcome.traces}
    every = {(c, v) for c in ("ok", "bad", "crash", "skip", "xss") for v in ("v1", "v2")}
    assert cells == shard_cells(every, shard)
    assert len(outcome.traces) == len(traces)


def _shards(tmp_path: Path, eval_path: Path, labels: list[str]) -> list[Path]:
    return [run_eval(eval_path, runs_dir=tmp_path / "runs", shard=parse_shard(x)).run.path for x in labels]


def test_missing_duplicate_and_foreign_shards_are_clear_errors(tmp_path: Path, eval_path: Path, capsys: Any) -> None:
    one, two, three = _shards(tmp_path, eval_path, ["1/3", "2/3", "3/3"])
    assert main(["runs", "merge", str(one), str(three), "--out", str(tmp_path / "m")]) == 2
    assert "missing shard(s) 2/3" in capsys.readouterr().err.replace("\n", "")
    assert main(["runs", "merge", str(one), str(two), str(two), str(three)]) == 2
    assert "shard 2/3 is given twice" in capsys.readouterr().err.replace("\n", "")
    (other,) = _shards(tmp_path, eval_path, ["1/2"])
    with pytest.raises(ShardError, match="shards of different N"):
        merge_runs([one, two, three, other])
    whole = run_eval(eval_path, runs_dir=tmp_path / "runs").run.path
    with pytest.raises(ShardError, match="not a shard run"):
        merge_runs([whole, one])
    config = yaml.safe_load(eval_path.read_text())
    eval_path.write_text(yaml.safe_dump({**config, "concurrency": 3}))
    (changed,) = _shards(tmp_path, eval_path, ["2/3"])
    with pytest.raises(ShardError, match="another config"):
        merge_runs([one, changed, three])
    (two / SUMMARY_FILE).unlink()
    with pytest.raises(ShardError, match=r"shard 2/3 .* did not finish"):
        merge_runs([one, two, three])
    assert not (tmp_path / "m").exists()  # nothing written on an error


def test_shard_flag_misuse_exits_2_naming_the_problem(tmp_path: Path, eval_path: Path, capsys: Any) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(["run", str(eval_path), "--shard", "4/3", *runs]) == 2
    assert "--shard 4/3" in capsys.readouterr().err
    assert main(["run", str(eval_path), "--shard", "1/3", "--sqlite", str(tmp_path / "r.db"), *runs]) == 2
    assert "give --sqlite/--postgres to `runs merge`" in capsys.readouterr().err.replace("\n", "")
    assert main(["run", "--resume", "x", "--shard", "1/3", *runs]) == 2
    assert "cannot be combined with --resume" in capsys.readouterr().err.replace("\n", "")
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_more_shards_than_cells_leaves_empty_shards_that_merge(tmp_path: Path, eval_path: Path) -> None:
    shards = _shards(tmp_path, eval_path, [f"{i}/12" for i in range(1, 13)])  # 10 cells: shards 11 and 12 empty
    assert [len(RunDirectory(p).read_traces()) for p in shards] == [1] * 10 + [0, 0]
    merged = merge_runs(shards, out=tmp_path / "merged")
    assert len(merged.traces) == 10 and len(merged.results) == 20
    whole = run_eval(eval_path, runs_dir=tmp_path / "whole").run.path
    assert _summary(merged.run.path) == _summary(whole)


def test_merge_saves_to_sqlite_and_gates_like_a_run(tmp_path: Path, eval_path: Path, capsys: Any) -> None:
    shards = _shards(tmp_path, eval_path, ["1/2", "2/2"])
    db = tmp_path / "runs.db"
    args = ["runs", "merge", *map(str, shards), "--sqlite", str(db), "--fail-on-regression"]
    assert main(args) == 1  # v2 regressed on case ok against baseline v1: the gate of `run`, on the whole run
    assert "gate failed: variant v2: regressed: ok" in capsys.readouterr().out
    assert main(["runs", "list", "--sqlite", str(db)]) == 0
    listed = capsys.readouterr().out
    assert listed.count("report_demo") == 1  # the merged run, once


def test_runs_list_marks_shard_runs_as_partial_with_their_shard(
    tmp_path: Path, eval_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # one line per run: the marks are read whole
    whole = run_eval(eval_path, runs_dir=tmp_path / "runs").run.path
    first, second = _shards(tmp_path, eval_path, ["1/2", "2/2"])
    (second / SUMMARY_FILE).unlink()  # a shard killed before its end: unfinished too
    capsys.readouterr()
    assert main(["runs", "list", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "partial: shard 1/2, v1" in lines[first.name]  # its pass rates still shown, after the mark
    assert "partial: shard 2/2, unfinished: 5 of 5 traces" in lines[second.name]  # the shard's 5 of 10 cells
    assert "partial" not in lines[whole.name]
    assert "`evaltrace runs merge` joins all shards" in out
