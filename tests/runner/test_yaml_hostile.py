"""Hostile eval.yaml / cases.yaml: undecodable bytes, alias bombs, recursive aliases, deep nesting, sheer size.

Each is refused with a RunConfigError naming the file (CLI exit 2, no traceback), with memory bounded: the bomb
tests count what the loader constructs instead of timing it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from yaml.constructor import SafeConstructor

from evaltrace._internal import safe_yaml
from evaltrace.cli import main
from evaltrace.exceptions import SchemaError
from evaltrace.runner import RunConfigError, load_eval_config
from evaltrace.runner import config as runner_config
from evaltrace.runner.config import load_cases
from evaltrace.runner.config_models import MAX_NAME_LENGTH
from evaltrace.runner.rundir import read_summary_file

from .conftest import Project

LOADERS = ["libyaml", "python"] if safe_yaml.WITH_LIBYAML else ["python"]

# The classic "billion laughs": nine levels of nine aliases, 9**9 strings once expanded, in a few hundred bytes.
BOMB = 'lol: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"l{level}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for level, (previous, name) in enumerate(zip("abcdefgh", "bcdefghi", strict=True))
)


@pytest.fixture(params=LOADERS)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with libyaml's parser and with the pure-Python one: both carry the guards."""
    if request.param == "python":
        monkeypatch.setattr(safe_yaml, "_LOADER", safe_yaml._PyLoader)
    yield request.param


@pytest.fixture
def constructed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the nodes turned into Python objects: a refused document must be refused before any is built."""
    calls: list[int] = []
    original = SafeConstructor.construct_object

    def counting(self: SafeConstructor, node: Any, deep: bool = False) -> Any:
        calls.append(1)
        return original(self, node, deep)

    monkeypatch.setattr(SafeConstructor, "construct_object", counting)
    return calls


def _cases_file(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(RunConfigError) as info:
        load_cases(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


def test_non_utf8_bytes_are_named_with_their_offset(tmp_path: Path) -> None:
    path = _cases_file(tmp_path, b"- id: caf\xe9\n  input: {q: 1}\n")
    assert _refusal(path) == f"{path}: not UTF-8 text: byte 0xe9 at offset 9 (invalid continuation byte)"


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = _cases_file(tmp_path, "\ufeff- id: café\n".encode())
    assert [case.id for case in load_cases(path)] == ["café"]


def test_an_alias_bomb_is_refused_with_memory_bounded(loader: str, tmp_path: Path) -> None:
    path = _cases_file(tmp_path, BOMB + "cases: [{id: a}]\n")
    assert len(BOMB) < 700
    tracemalloc.start()
    try:
        message = _refusal(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "refused: aliases expand to" in message and "over the limit of 100000" in message
    assert peak < 2_000_000
    with pytest.raises(safe_yaml.YamlLimitError) as info:
        safe_yaml.load(BOMB)
    # Counted, never expanded: the loader went through the ~100 nodes written, not the 9**9 they stand for.
    assert info.value.written < 150
    assert info.value.expanded > 9**9


def test_a_bomb_through_merge_keys_is_refused(loader: str, constructed: list[int], tmp_path: Path) -> None:
    levels = ["a0: &a0 {x0: 1, y0: 2, z0: 3, w0: 4}"]
    for level in range(1, 12):
        levels.append(
            f"a{level}: &a{level} {{<<: [*a{level - 1}], k{level}: [*a{level - 1}, *a{level - 1}, *a{level - 1}, *a{level - 1}]}}"
        )
    path = _cases_file(tmp_path, "\n".join(levels) + "\ncases: [{id: a}]\n")
    assert "aliases expand to" in _refusal(path)
    assert constructed == []


SAFE_LOAD_DOCUMENTS = [
    "a: [1, 2.5, {b: c}, null, true, 0x1f, 2024-01-01, 2024-01-01T10:00:00Z, '1', !!str 2, !!binary aGk=, ~]",
    "d: &x {e: 1}\nf: *x\ng: [*x, *x]",
    "a: &a {x: 1}\nb:\n  <<: *a\n  y: 2",
    "!!set {a, b}",
    "a: !!omap [x: 1]",
    "{a: 1, a: 2}",
    "? [1, 2]\n: v",
    "",
    "---\n",
    "plain scalar",
    "a: &a 1\nb: &a 2",
    "x: !foo 1",
    "a: 1\n---\nb: 2",
    "x: *nope",
]


@pytest.mark.parametrize("text", SAFE_LOAD_DOCUMENTS)
def test_ordinary_documents_load_as_safe_load_does(loader: str, text: str) -> None:
    try:
        expected: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        with pytest.raises(type(exc)) as info:
            safe_yaml.load(text)
        assert info.value.problem == exc.problem  # type: ignore[attr-defined]
    else:
        assert safe_yaml.load(text) == expected


def test_aliases_reusing_a_block_within_the_allowance_load(loader: str, tmp_path: Path) -> None:
    shared = "x-shared: &shared {context: [policy one, policy two], user: {tier: gold}}\n"
    cases = "".join(f"  - {{id: c{i}, input: *shared}}\n" for i in range(200))
    path = _cases_file(tmp_path, shared + "cases:\n" + cases)
    loaded = load_cases(path)
    assert len(loaded) == 200 and loaded[199].input == {
        "context": ["policy one", "policy two"],
        "user": {"tier": "gold"},
    }


@pytest.mark.parametrize(
    "content",
    ["- &a {id: x, input: {self: *a}}\n", "- id: x\n  input: &b [1, [2, *b]]\n"],
    ids=["mapping", "sequence"],
)
def test_a_recursive_alias_is_refused(loader: str, content: str, tmp_path: Path) -> None:
    path = _cases_file(tmp_path, content)
    assert "refused: recursive alias *" in _refusal(path)


@pytest.mark.parametrize(
    "nested",
    [
        "[" * 150 + "]" * 150,
        "".join(f"\n{'  ' * (level + 2)}k{level}:" for level in range(150)) + " leaf",
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_refused_at_the_depth_cap(loader: str, nested: str, tmp_path: Path) -> None:
    path = _cases_file(tmp_path, f"- id: deep\n  input:\n    v: {nested}\n")
    assert f"refused: nested more than {safe_yaml.MAX_DEPTH} levels deep (line " in _refusal(path)


def test_nesting_at_the_cap_loads(loader: str, tmp_path: Path) -> None:
    depth = safe_yaml.MAX_DEPTH - 3  # the case list, the case and its input are three levels
    path = _cases_file(tmp_path, "- id: deep\n  input: {v: " + "[" * (depth - 1) + "]" * (depth - 1) + "}\n")
    assert load_cases(path)[0].id == "deep"


def test_a_million_open_brackets_give_an_error_not_a_recursion_error(loader: str, tmp_path: Path) -> None:
    path = _cases_file(tmp_path, "- id: x\n  input: {v: " + "[" * 1_000_000 + "\n")
    message = _refusal(path)
    assert "nested more than" in message or "maximum nesting depth" in message


def test_a_hostile_eval_yaml_is_named(loader: str, tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text("name: x\ncases: cases.yaml\n" + BOMB)
    with pytest.raises(RunConfigError, match=r"eval\.yaml: refused: aliases expand to"):
        load_eval_config(path)


def test_the_cli_reports_a_bomb_and_exits_2(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    system = {"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}
    project.write({"name": "x", "systems": [system]})
    (project.root / "cases.yaml").write_text(BOMB + "cases: [{id: a}]\n")
    code = main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    assert "cases.yaml: refused: aliases expand to" in captured.err.replace("\n", "")
    assert "Traceback" not in captured.err + captured.out


def test_a_run_summary_with_a_bomb_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "summary.yaml"
    path.write_text(BOMB)
    with pytest.raises(SchemaError, match="aliases expand to"):
        read_summary_file(path)


def test_a_large_cases_file_loads_through_libyaml(tmp_path: Path) -> None:
    if not safe_yaml.WITH_LIBYAML:
        pytest.skip("PyYAML was built without libyaml")
    assert not issubclass(safe_yaml._LOADER, yaml.scanner.Scanner)  # libyaml scans and parses
    case = "- id: c{i}\n  input: {{question: 'What is the refund policy for order {i}?', context: [a, b, c]}}\n"
    path = _cases_file(tmp_path, "".join(case.format(i=i) for i in range(20_000)))
    assert path.stat().st_size > 1_500_000
    cases = load_cases(path)
    assert len(cases) == 20_000 and cases[-1].input["context"] == ["a", "b", "c"]


def _loaded_within(path: Path, seconds: float = 30.0) -> BaseException | None:
    """Load ``path`` as eval.yaml's cases in a thread; fail if it does not finish (a FIFO blocks its reader)."""
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_cases(path)
            outcome.append(None)
        except BaseException as exc:  # reported to the test
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive() and stat.S_ISFIFO(os.stat(path).st_mode):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader before failing
        worker.join(seconds)
    assert outcome, f"loading {path} did not finish within {seconds} s"
    return outcome[0]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    os.mkfifo(path)
    error = _loaded_within(path)
    assert isinstance(error, RunConfigError)
    assert str(error) == f"{path}: expected a regular file, got a named pipe (FIFO)"


def test_a_character_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    try:  # a /dev/zero of our own (root), else a link to it: either way it is only stat()ed, never read
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        path.symlink_to("/dev/zero")
    error = _loaded_within(path)
    assert isinstance(error, RunConfigError)
    assert str(error) == f"{path}: expected a regular file, got a character device"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").mkdir()
    with pytest.raises(RunConfigError, match=r"cases\.yaml: expected a regular file, got a directory$"):
        load_cases(tmp_path / "cases.yaml")


def test_reads_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _cases_file(tmp_path, "- id: a\n" * 200)
    monkeypatch.setattr(runner_config, "MAX_AUTHORED_BYTES", 1024 * 1024 // 2)
    with pytest.raises(RunConfigError, match="duplicate case id"):  # under the bound: read and parsed
        load_cases(path)
    monkeypatch.setattr(runner_config, "MAX_AUTHORED_BYTES", 100)
    with pytest.raises(RunConfigError, match=r"cases\.yaml: larger than 0 MiB: refused"):
        load_cases(path)


def test_the_cli_names_a_fifo_cases_file_and_exits_2(project: Project) -> None:
    # In a child process with a deadline: a run that blocks on the pipe must fail the test, not hang it.
    system = {"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}
    project.write({"name": "x", "systems": [system], "cases": "pipe"})
    os.mkfifo(project.root / "pipe")
    command = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]
    try:
        done = subprocess.run(
            [sys.executable, "-c", command, *args], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("evaltrace run blocked on the FIFO")
    assert done.returncode == 2
    assert "pipe: expected a regular file, got a named pipe (FIFO)" in done.stderr.replace("\n", "")
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize("where", ["name", "systems"])
def test_a_10000_character_name_is_refused_naming_the_limit(
    project: Project, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    system = {"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}
    long = "n" * 10_000
    if where == "name":
        project.write({"name": long, "systems": [system]})
        entry = "name"
    else:
        project.write({"name": "x", "systems": [{**system, "name": long}]})
        entry = "systems[0].name"
    code = main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    err = captured.err.replace("\n", "")
    assert f"eval.yaml: {entry}: expected at most {MAX_NAME_LENGTH} characters" in err
    assert "got 10,000" in err and long not in err  # the name is not echoed whole
    assert "Traceback" not in captured.err + captured.out
    assert not project.runs_dir.exists()


def test_a_name_at_the_limit_runs(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    system = {
        "name": "v" * MAX_NAME_LENGTH,
        "adapter": "python_function",
        "config": {"target": project.target("answer")},
    }
    project.write({"name": "n" * MAX_NAME_LENGTH, "systems": [system]})
    assert main(["run", str(project.eval_path), "--runs-dir", str(project.runs_dir), "--no-progress"]) == 0
    capsys.readouterr()
