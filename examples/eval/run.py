"""Run the offline evaluation of ``eval.yaml`` end to end, with no network: ``python examples/eval/run.py``.

It starts the local stand-ins of ``servers.py`` (the deployed agent, in Anthropic's Messages shape, and an
OpenAI-compatible judge), points eval.yaml at them through environment variables, then runs

    evaltrace run examples/eval/eval.yaml --runs-dir <dir>
    evaltrace report <run_id> --runs-dir <dir> -o <dir>/<run_id>/run.html

and prints where the run and its report are. Arguments: an optional runs directory (default ``./runs``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import servers  # noqa: E402 (after the path insert: servers imports agent from this folder)


def _evaltrace(*args: str, env: dict[str, str]) -> int:
    command = [sys.executable, "-c", "import sys; from evaltrace.cli import main; sys.exit(main())", *args]
    return subprocess.run(command, env=env, check=False).returncode


def main() -> int:
    """Start the servers, run the eval, render its report; returns the exit code of ``evaltrace run``."""
    runs_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "runs").resolve()
    server, url = servers.start()
    env = dict(os.environ, AGENT_URL=url, JUDGE_BASE_URL=f"{url}/v1", JUDGE_API_KEY="local-example-key")
    try:
        code = _evaltrace("run", str(HERE / "eval.yaml"), "--runs-dir", str(runs_dir), env=env)
        runs = sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name.endswith("_support_agent"))
        if not runs:
            return code or 1
        run = runs[-1]
        _evaltrace("report", run.name, "--runs-dir", str(runs_dir), "-o", str(run / "run.html"), env=env)
        print(f"run: {run}\nreport: {run / 'run.html'}")
        return code
    finally:
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
