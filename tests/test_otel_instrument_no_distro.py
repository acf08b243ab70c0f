"""``opentelemetry-instrument python app.py`` with evaltrace and no opentelemetry-distro exports the app's spans.

The app (examples/otel_instrument.py, which never imports evaltrace) runs under the real ``opentelemetry-instrument``
in a throwaway virtualenv that sees this interpreter's packages except opentelemetry-distro: a directory of links to
every installed distribution but that one, plus evaltrace's own metadata written from this repository's
pyproject.toml (so its entry points are the ones this tree declares, whatever the interpreter has installed). Without
evaltrace's ``opentelemetry_distro`` entry point nothing would set the SDK up and every span would be dropped
silently. .ci/run proves the same with the built wheel in a clean virtualenv.

The last test runs the real opentelemetry-distro beside ours, in this interpreter: ours hands over to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

pytest.importorskip("openai")

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = REPO_ROOT / "examples" / "otel_instrument.py"
CASSETTE = (
    REPO_ROOT / "tests" / "fixtures" / "openai-cassettes" / "otel-contrib" / "test_chat_completion_streaming.yaml"
)
_ENV_PREFIXES = ("OPENAI_", "PYTEST_", "OTEL_", "EVALTRACE_", "LANGFUSE_", "PHOENIX_", "PYTHON")
# What a link farm must leave out: the distro under test's absence, and evaltrace's installed metadata and editable
# hooks (replaced by this tree's).
_HIDDEN_PREFIXES = ("opentelemetry_distro-", "evaltrace-", "__editable__", "_editable_impl_evaltrace")


def _entry_points_txt() -> str:
    """This tree's entry points, in the ``entry_points.txt`` format an installer would write."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    return "".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items()) + "\n"
        for group, entries in groups.items()
    )


@pytest.fixture(scope="module")
def no_distro_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv's python seeing this interpreter's packages but opentelemetry-distro, and this tree's evaltrace."""
    root = tmp_path_factory.mktemp("no-distro")
    farm = root / "site"
    farm.mkdir()
    site_packages = Path(sysconfig.get_paths()["purelib"])
    for entry in site_packages.iterdir():
        if not entry.name.startswith(_HIDDEN_PREFIXES) and entry.suffix != ".pth":
            (farm / entry.name).symlink_to(entry)
    metadata = farm / "evaltrace-0.0.0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: evaltrace\nVersion: 0.0.0\n", encoding="utf-8")
    (metadata / "entry_points.txt").write_text(_entry_points_txt(), encoding="utf-8")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # This tree's src first, so the evaltrace imported is the one under test.
    (Path(purelib) / "zz_no_distro.pth").write_text(f"{REPO_ROOT / 'src'}\n{farm}\n", encoding="utf-8")
    return python


def _run(python: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the example under ``opentelemetry-instrument`` with ``python``'s packages only."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    clean.update(
        PATH=f"{python.parent}{os.pathsep}{clean.get('PATH', '')}",
        OTEL_SERVICE_NAME="zero-code-app",
        EVALTRACE_EXAMPLE_CASSETTE=str(CASSETTE),
        # Other OpenAI instrumentations installed beside ours (the `peers` extra) register as "openai".
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai",
        **env,
    )
    # The opentelemetry-instrument command itself, run by this virtualenv's python (its script's shebang names
    # the interpreter it was installed with); it re-runs `python` from PATH with its sitecustomize.
    command = "from opentelemetry.instrumentation.auto_instrumentation import run; run()"
    result = subprocess.run(
        [str(python), "-c", command, "python", str(EXAMPLE)],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert 'answer: "This is a test."' in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_the_distro_under_test_is_absent(no_distro_python: Path) -> None:
    probe = (
        "import importlib.metadata as m; print(sorted(e.name for e in m.entry_points(group='opentelemetry_distro')))"
    )
    names = subprocess.run([no_distro_python, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert json.loads(names.replace("'", '"')) == ["evaltrace"]


def test_without_a_distro_spans_reach_the_local_store(no_distro_python: Path, tmp_path: Path) -> None:
    _run(no_distro_python, tmp_path)
    listing = subprocess.run(
        [no_distro_python, "-c", "from evaltrace.cli import main; main()", "traces", "list"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [row] = [line for line in listing.splitlines() if "chat gpt-4" in line]
    assert "zero-code-app" in row
    assert "12→5" in row  # the instrumentor's token counts: our OpenAI instrumentor made the span


def test_without_a_distro_otel_traces_exporter_console_prints_the_spans(no_distro_python: Path, tmp_path: Path) -> None:
    result = _run(no_distro_python, tmp_path, OTEL_TRACES_EXPORTER="console")
    # evaltrace's console exporter: one line per span, on stderr (stdout stays the app's).
    [line] = [line for line in result.stderr.splitlines() if line.startswith("[evaltrace]")]
    assert " chat gpt-4 (llm) " in line
    assert "input_tokens=12 output_tokens=5" in line
    assert not (tmp_path / ".evaltrace").exists()  # an exporter named: no local store beside it


def test_without_a_distro_a_bad_setting_is_one_line_and_the_app_runs(no_distro_python: Path, tmp_path: Path) -> None:
    result = _run(no_distro_python, tmp_path, OTEL_TRACES_EXPORTER="zipkin")
    assert "evaltrace: tracing is off for this run: OTEL_TRACES_EXPORTER: unsupported exporter zipkin" in result.stderr
    assert not (tmp_path / ".evaltrace").exists()


def test_without_a_distro_a_setting_configure_rejects_is_one_line(no_distro_python: Path, tmp_path: Path) -> None:
    result = _run(no_distro_python, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318")
    [line] = [line for line in result.stderr.splitlines() if line.startswith("evaltrace:")]
    assert "tracing is off for this run" in line
    assert "'OTEL_EXPORTER_OTLP_ENDPOINT'" in line and "has no scheme" in line
    assert not (tmp_path / ".evaltrace").exists()


def test_without_a_distro_none_sets_nothing_up(no_distro_python: Path, tmp_path: Path) -> None:
    result = _run(no_distro_python, tmp_path, OTEL_TRACES_EXPORTER="none")
    assert result.stdout.strip() == ""
    assert not (tmp_path / ".evaltrace").exists()


def test_beside_opentelemetry_distro_ours_hands_over_to_it(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.distro")
    # Whichever distro opentelemetry-instrument finds first, the set-up is opentelemetry-distro's: its defaults
    # (OTEL_TRACES_EXPORTER=otlp) are applied, and evaltrace configures nothing.
    probe = (
        "import os, evaltrace.config as c\n"
        "from evaltrace.instrumentation.distro import EvaltraceDistro\n"
        "EvaltraceDistro().configure()\n"
        "print(os.environ.get('OTEL_TRACES_EXPORTER'), c.current_handle())\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    clean["PYTHONPATH"] = str(REPO_ROOT / "src")
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=clean, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["otlp", "None"]
    assert not (tmp_path / ".evaltrace").exists()
