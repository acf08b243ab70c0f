"""The run directory ``runs/<run_id>/``: the durable surface of an offline run (data-model.md part A).

``traces.jsonl`` is appended one line per (case, variant) as each finishes, before any evaluator runs, and made
read-only once every cell ran; ``results.jsonl`` is appended one line per evaluation as it finishes, then
replaced atomically in canonical order when evaluation ends (``re-evaluate`` replaces it too); ``summary.yaml``
is replaced atomically. Each line goes out in one ``write`` on an ``O_APPEND`` descriptor, so a killed run leaves
whole lines plus at most one torn last line, which readers ignore and :meth:`RunDirectory.repair` cuts off before
a resume appends. Lines are not fsynced one by one: a SIGKILL loses nothing written (the kernel has it), a power
cut may lose the last lines (a resume redoes them).

They hold prompts and outputs, so every file is created owner-only (``0600``; ``traces.jsonl`` sealed ``0400``)
and the run directory, and ``runs_dir`` when evaltrace creates it, ``0700`` (:mod:`evaltrace._internal.private_files`).

Beside the files of the layout the directory holds ``cases.jsonl`` (the cases as they were when the run executed,
so a re-evaluation judges against the same expectations after cases.yaml was edited) and ``run_meta.json``
(:class:`RunMeta`: where the eval.yaml was and the ``sys.path`` the run imported from, so ``re-evaluate`` and
``run --resume`` find ``import:`` evaluators and targets without extra flags).

Variants with a ``workspace`` also leave ``artifacts/<case_id>/<variant>/`` per cell (before/, after/, diff.txt,
artifact.json; see :mod:`evaltrace.runner.artifacts`), written before the cell's trace is appended.

Traces and results written by an older 1.x release are migrated as they are read
(:mod:`evaltrace.schema.migrations`); the files themselves are not rewritten.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError

from evaltrace._internal import safe_yaml
from evaltrace._internal.private_files import PRIVATE_DIR_MODE, make_private_dirs, private_opener, write_private_text
from evaltrace.exceptions import EvaltraceError, SchemaError
from evaltrace.runner.shards import ShardSpec
from evaltrace.schema import EvalCase, EvaluationResult, RunSummary, Trace
from evaltrace.schema.migrations import RecordKind, migrate_record
from evaltrace.schema.runs import CaseSelection

__all__ = [
    "ARTIFACTS_DIR",
    "CASES_FILE",
    "CONFIG_FILE",
    "HASH_FILE",
    "META_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TRACES_FILE",
    "JsonlAppender",
    "RunDirectory",
    "RunMeta",
    "RunNotFoundError",
    "RunPathError",
    "load_record",
    "new_run_id",
    "resolve_run",
    "saved_lines",
]

TRACES_FILE = "traces.jsonl"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.yaml"
CONFIG_FILE = "config.yaml"
HASH_FILE = "config_hash.txt"
CASES_FILE = "cases.jsonl"
META_FILE = "run_meta.json"
ARTIFACTS_DIR = "artifacts"
"""Filesystem evals' ``<case_id>/<variant>/`` directories (:mod:`evaltrace.runner.artifacts`)."""
_ID_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"
_MAX_ID_ATTEMPTS = 1000

M = TypeVar("M", bound=BaseModel)
# Produced records migrated on read (evaltrace.schema.migrations); files are never rewritten for it.
_RECORD_KINDS: dict[type[BaseModel], RecordKind] = {Trace: "trace", EvaluationResult: "result"}


class RunNotFoundError(EvaltraceError, LookupError):
    """No run directory matches the given id or path."""


class RunPathError(RunNotFoundError):
    """A reference that can only be a path (``/tmp/x``, ``../x``, ``a/b``) is not a run directory."""


class RunMeta(BaseModel):
    """How a run was started, for re-evaluating and resuming it from any working directory.

    Attributes:
        eval_path: Absolute path of the eval.yaml.
        config_dir: Its directory (``import:`` references resolve here first).
        sys_path: The absolute ``sys.path`` of the run (PYTHONPATH, the working directory, ...).
        config_verbatim: config.yaml is the eval.yaml as written (no secret was masked), so it can rebuild the run.
        started_at: When the run started.
        selection: The part of the dataset the run used (``--case``, ``--tag``, ...); None: every case.
        run_namespace: The ``--namespace`` given to the run; re-evaluate, resume and ``runs push`` save with it.
        shard: The ``--shard i/N`` this run executes (a partial run for ``runs merge``); None: every cell.
    """

    eval_path: str
    config_dir: str
    sys_path: list[str] = Field(default_factory=list)
    config_verbatim: bool = False
    started_at: dt.datetime | None = None
    selection: CaseSelection | None = None
    run_namespace: dict[str, str] | None = None
    shard: ShardSpec | None = None


class JsonlAppender:
    """Appends models to a jsonl file, one whole line per ``write`` (``O_APPEND``), for a killed run to resume.

    Args:
        path: The file.
        exclusive: Create it, failing if it exists (a new run); else append to it (a resume).
    """

    def __init__(self, path: Path, *, exclusive: bool) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if exclusive else 0)
        self._fd = private_opener(path, flags)

    def append(self, model: BaseModel) -> None:
        """Write ``model`` as one line."""
        view = memoryview((model.model_dump_json() + "\n").encode("utf-8"))
        while view:  # a short write (rare: a full disk, a signal) is continued, never left half done
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Flush to disk and close."""
        os.fsync(self._fd)
        os.close(self._fd)


def new_run_id(eval_name: str, when: dt.datetime) -> str:
    """Return the sortable run id ``{ISO8601 with '-' for ':'}_{eval_name}`` (UTC, whole seconds)."""
    return f"{when.astimezone(dt.UTC).strftime(_ID_TIME_FORMAT)}_{eval_name}"


def resolve_run(reference: str | Path, runs_dir: Path, *, argument: str | None = None) -> Path:
    """Find a run directory from a path, a run id under ``runs_dir``, or a unique prefix of one.

    A reference that looks like a path (absolute, or holding a path separator, ``.`` or ``..``) must be a run
    directory; it is never joined to ``runs_dir`` nor used as a prefix, so an id can only name a run inside
    ``runs_dir``.

    Args:
        reference: A run directory, a run id, or a unique prefix of one.
        runs_dir: Where run ids are looked up.
        argument: The command-line argument it came from (``RUN_A``, ``--resume``), named in the error.

    Raises:
        RunNotFoundError: Nothing (or more than one run) matches.
    """
    text = str(reference)
    where = f"{argument}: " if argument else ""
    candidate = Path(reference)
    if _is_run(candidate):
        return candidate
    if _is_path_like(text):
        raise RunPathError(
            f"{where}{text!r} is not a run directory (no {SUMMARY_FILE}, {TRACES_FILE} or {CONFIG_FILE} in it);"
            f" a run id names a directory in {runs_dir}"
        )
    direct = runs_dir / text
    if _is_run(direct):
        return direct
    matches = sorted(p for p in runs_dir.glob(f"{glob.escape(text)}*") if _is_run(p))
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(p.name for p in matches[:5])
        raise RunNotFoundError(f"{where}{text!r} matches several runs in {runs_dir}: {names}")
    raise RunNotFoundError(f"{where}no run {text!r} (not a run directory, nor a run id in {runs_dir})")


def saved_lines(path: Path) -> int:
    """How many whole records an appended jsonl file holds (a torn last line, cut off on resume, is not one)."""
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n") and line.strip())
    except OSError:  # not written yet (or unreadable: nothing a resume could keep either)
        return 0


def _is_path_like(reference: str) -> bool:
    """True when ``reference`` can only be a path: a run id is a plain directory name."""
    separators = {"/", os.sep, os.altsep or "/"}
    return (
        not reference
        or any(sep in reference for sep in separators)
        or reference in (".", "..")
        or Path(reference).is_absolute()
        or "\0" in reference
    )


def _is_run(path: Path) -> bool:
    # config.yaml is written first: a run killed before its first trace is still a run (to resume).
    return any((path / name).is_file() for name in (SUMMARY_FILE, TRACES_FILE, CONFIG_FILE))


def _atomic_write(path: Path, text: str) -> None:
    write_private_text(path, text)


def _jsonl(models: Iterable[BaseModel]) -> str:
    return "".join(m.model_dump_json() + "\n" for m in models)


def _split(data: bytes) -> tuple[list[bytes], bytes]:
    """Split jsonl bytes into newline-terminated lines and what follows the last newline."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), data[end:]


def _whole(tail: bytes, model: type[BaseModel]) -> bool:
    """True when an unterminated last line is a whole record (cut just before its newline), not a torn one."""
    try:
        model.model_validate_json(tail)
    except ValidationError:
        return False
    return True


def _read_jsonl(path: Path, model: type[M]) -> list[M]:
    """Load every line of ``path``; a torn last line (a killed writer) is left out, other bad lines raise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines, tail = _split(data)
    if tail.strip() and _whole(tail, model):
        lines.append(tail)
    items: list[M] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(load_record(model, line))
        except ValueError as exc:  # pydantic's ValidationError included
            problem = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise SchemaError(f"{path}:{number}: not a valid {model.__name__}: {problem}") from None
    return items


def load_record(model: type[M], line: bytes | str) -> M:
    """Parse one jsonl line as ``model``; traces and results written by older 1.x releases are migrated first.

    Raises:
        ValueError: The line is not JSON, or not a valid ``model`` (a pydantic ValidationError).
    """
    kind = _RECORD_KINDS.get(model)
    if kind is None:
        return model.model_validate_json(line)
    data = json.loads(line)
    if isinstance(data, dict):
        data = migrate_record(kind, data).data
    return model.model_validate(data)


class RunDirectory:
    """Reads and writes the files of one run directory.

    Attributes:
        path: The directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def run_id(self) -> str:
        """The run id (the directory name)."""
        return self.path.name

    @classmethod
    def create(cls, runs_dir: Path, eval_name: str, when: dt.datetime) -> RunDirectory:
        """Create a new, empty run directory; a taken id moves on by a second so ids stay unique and sortable."""
        make_private_dirs(runs_dir)
        for offset in range(_MAX_ID_ATTEMPTS):
            path = runs_dir / new_run_id(eval_name, when + dt.timedelta(seconds=offset))
            try:
                path.mkdir(mode=PRIVATE_DIR_MODE)
            except FileExistsError:
                continue
            path.chmod(PRIVATE_DIR_MODE)  # mkdir's mode is ANDed with the umask
            return cls(path)
        raise FileExistsError(f"no free run id in {runs_dir} near {when.isoformat()}")

    def write_config(
        self, masked_config: dict[str, Any], digest: str, cases: list[EvalCase], *, verbatim: str | None = None
    ) -> None:
        """Write ``config.yaml``, ``config_hash.txt`` and the cases snapshot.

        Args:
            masked_config: The config with secrets masked (dumped as YAML unless ``verbatim`` is given).
            digest: The config hash.
            cases: The cases the run uses.
            verbatim: The authored file text, kept as is (comments included) when masking changed nothing.
        """
        text = verbatim if verbatim is not None else yaml.safe_dump(masked_config, sort_keys=False, allow_unicode=True)
        _atomic_write(self.path / CONFIG_FILE, text)
        _atomic_write(self.path / HASH_FILE, digest + "\n")
        _atomic_write(self.path / CASES_FILE, _jsonl(cases))

    def write_traces(self, traces: list[Trace]) -> None:
        """Write ``traces.jsonl`` once; it is then made read-only.

        Raises:
            FileExistsError: The run already has traces (they are never rewritten).
        """
        target = self.path / TRACES_FILE
        with open(target, "x", encoding="utf-8", opener=private_opener) as handle:
            handle.write(_jsonl(traces))
            handle.flush()
            os.fsync(handle.fileno())
        target.chmod(stat.S_IRUSR)

    def append_traces(self, *, new_run: bool) -> JsonlAppender:
        """Open ``traces.jsonl`` for appending one trace per finished cell (created by a new run)."""
        target = self.path / TRACES_FILE
        if not new_run and target.exists():
            target.chmod(stat.S_IRUSR | stat.S_IWUSR)
        return JsonlAppender(target, exclusive=new_run)

    def seal_traces(self) -> None:
        """Make ``traces.jsonl`` read-only: every cell ran."""
        (self.path / TRACES_FILE).chmod(stat.S_IRUSR)

    def append_results(self) -> JsonlAppender:
        """Open ``results.jsonl`` for appending one result per finished evaluation."""
        return JsonlAppender(self.path / RESULTS_FILE, exclusive=False)

    def repair(self) -> list[str]:
        """Cut a torn last line off traces.jsonl and results.jsonl (a killed run); return what was cut, per file."""
        repaired = []
        models: tuple[tuple[str, type[BaseModel]], ...] = ((TRACES_FILE, Trace), (RESULTS_FILE, EvaluationResult))
        for name, model in models:
            path = self.path / name
            if not path.is_file():
                continue
            data = path.read_bytes()
            _, tail = _split(data)
            if not tail:
                continue
            mode = path.stat().st_mode
            path.chmod(mode | stat.S_IWUSR)
            if _whole(tail, model):  # cut just before its newline: complete it, or the next line would join it
                with path.open("ab") as handle:
                    handle.write(b"\n")
            else:
                os.truncate(path, len(data) - len(tail))
                repaired.append(f"{name}: dropped a torn last line ({len(tail)} bytes)")
            path.chmod(mode)
        return repaired

    def write_meta(self, meta: RunMeta) -> None:
        """Write ``run_meta.json``."""
        _atomic_write(self.path / META_FILE, meta.model_dump_json(indent=1) + "\n")

    def read_meta(self) -> RunMeta | None:
        """Load ``run_meta.json`` (None for runs made before it existed)."""
        path = self.path / META_FILE
        if not path.is_file():
            return None
        try:
            return RunMeta.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            raise SchemaError(f"{path}: not valid run metadata: {exc.errors()[0]['msg']}") from None

    def write_results(self, results: list[EvaluationResult]) -> None:
        """Replace ``results.jsonl`` atomically."""
        _atomic_write(self.path / RESULTS_FILE, _jsonl(results))

    def write_summary(self, summary: RunSummary) -> None:
        """Replace ``summary.yaml`` atomically."""
        data = summary.model_dump(mode="json")
        _atomic_write(self.path / SUMMARY_FILE, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def read_traces(self) -> list[Trace]:
        """Load ``traces.jsonl``."""
        return _read_jsonl(self.path / TRACES_FILE, Trace)

    def read_results(self) -> list[EvaluationResult]:
        """Load ``results.jsonl`` (empty when the run was never evaluated)."""
        path = self.path / RESULTS_FILE
        return _read_jsonl(path, EvaluationResult) if path.exists() else []

    def read_cases(self) -> list[EvalCase]:
        """Load the cases snapshot."""
        return _read_jsonl(self.path / CASES_FILE, EvalCase)

    def read_summary(self) -> RunSummary:
        """Load ``summary.yaml``."""
        return read_summary_file(self.path / SUMMARY_FILE)

    def read_config(self) -> dict[str, Any]:
        """Load ``config.yaml`` (the masked config the run used)."""
        data = safe_yaml.load((self.path / CONFIG_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise SchemaError(f"{self.path / CONFIG_FILE}: expected a mapping")
        return data

    def read_hash(self) -> str:
        """Return the config hash."""
        return (self.path / HASH_FILE).read_text(encoding="utf-8").strip()


def read_summary_file(path: Path) -> RunSummary:
    """Load a RunSummary from a YAML file.

    Raises:
        SchemaError: The file is missing or not a RunSummary.
    """
    try:
        data = safe_yaml.load(path.read_text(encoding="utf-8"))
        return RunSummary.model_validate(data)
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise SchemaError(f"{path}: not a valid RunSummary: {exc}") from None
