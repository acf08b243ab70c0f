#!/usr/bin/env bash
# Install (once) and start (once) an Arize Phoenix server on loopback for tests/integration.
#
#   eval "$(bash scripts/ci_phoenix.sh)"   # install if needed, start if not running, wait until healthy
#   bash scripts/ci_phoenix.sh stop        # stop the server this script started
#
# stdout carries only `export EVALTRACE_PHOENIX_URL=... EVALTRACE_PHOENIX_GRPC=...` (for eval); progress and
# timings go to stderr.
#
# Idempotent: a healthy server on the port is reused, an existing venv is reused. Phoenix lives in its own
# venv (it pins many packages) and is installed with uv (~20 s instead of ~2 min with pip).
# gRPC is forced onto 127.0.0.1 (Phoenix hard-codes [::]:PORT, every interface; tests bind loopback only).
#
# Environment (all optional):
#   PHOENIX_VERSION   arize-phoenix version to install (default 20.26.1, the one verified on these machines)
#   PHOENIX_VENV      venv directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/evaltrace/phoenix-<version>)
#   PHOENIX_WORKDIR   data directory, logs, pid file (default /tmp/evaltrace-phoenix)
#   PHOENIX_PORT      HTTP port (default 6006); PHOENIX_GRPC_PORT gRPC port (default 4317)
#   PHOENIX_READY_TIMEOUT  seconds to wait for /healthz (default 180)
set -euo pipefail

VERSION="${PHOENIX_VERSION:-20.26.1}"
VENV="${PHOENIX_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/evaltrace/phoenix-${VERSION}}"
WORKDIR="${PHOENIX_WORKDIR:-/tmp/evaltrace-phoenix}"
PORT="${PHOENIX_PORT:-6006}"
GRPC_PORT="${PHOENIX_GRPC_PORT:-4317}"
READY_TIMEOUT="${PHOENIX_READY_TIMEOUT:-180}"
URL="http://127.0.0.1:${PORT}"
PIDFILE="${WORKDIR}/phoenix.pid"
LOG="${WORKDIR}/phoenix.log"
PY="${PYTHON:-python3}"

t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
say() { echo "[ci_phoenix +$(elapsed)s] $*" >&2; }

healthy() {
  "$PY" - "$URL/healthz" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

if [[ "${1:-start}" == "stop" ]]; then
  if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")" && say "stopped pid $(cat "$PIDFILE")"
  else
    say "not running (no live pid in $PIDFILE)"
  fi
  rm -f "$PIDFILE"
  exit 0
fi

if healthy; then
  say "Phoenix already healthy at $URL (reusing it)"
  echo "export EVALTRACE_PHOENIX_URL=$URL EVALTRACE_PHOENIX_GRPC=http://127.0.0.1:${GRPC_PORT}"
  exit 0
fi

# --- install -------------------------------------------------------------------------------------------
MARKER="$VENV/.evaltrace-installed"  # written after a complete install; importing phoenix to check takes ~25 s
if [[ -x "$VENV/bin/python" && "$(cat "$MARKER" 2>/dev/null)" == "arize-phoenix==$VERSION" ]]; then
  say "reusing venv $VENV"
else
  say "installing arize-phoenix==$VERSION into $VENV"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check uv >&2
  "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" "arize-phoenix==$VERSION" >&2
  echo "arize-phoenix==$VERSION" >"$MARKER"
  say "installed"
fi
install_s=$(elapsed)

# Keep the gRPC receiver on loopback: Phoenix binds [::]:<port> unconditionally.
cat > "$VENV/phoenix_local.py" <<'EOF'
import sys

import grpc.aio._server as _server

_orig = _server.Server.add_insecure_port


def _loopback(self, address):
    if address.startswith("[::]:") or address.startswith("0.0.0.0:"):
        address = "127.0.0.1:" + address.rsplit(":", 1)[1]
    return _orig(self, address)


_server.Server.add_insecure_port = _loopback
from phoenix.server.main import main  # noqa: E402

sys.argv = ["phoenix", *sys.argv[1:]]
sys.exit(main())
EOF

# --- start ---------------------------------------------------------------------------------------------
mkdir -p "$WORKDIR"
if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  say "a Phoenix started earlier (pid $(cat "$PIDFILE")) is still starting; waiting for it"
else
  say "starting Phoenix on $URL (gRPC 127.0.0.1:$GRPC_PORT), log $LOG"
  PHOENIX_WORKING_DIR="$WORKDIR/data" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$PORT" PHOENIX_GRPC_PORT="$GRPC_PORT" \
  PHOENIX_TELEMETRY_ENABLED=false PHOENIX_ALLOW_EXTERNAL_RESOURCES=false PHOENIX_DISABLE_AGENT_ASSISTANT=true \
    setsid nohup "$VENV/bin/python" "$VENV/phoenix_local.py" serve >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
fi

start_t=$(date +%s)
while ! healthy; do
  if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    say "Phoenix exited during start-up; last log lines:"
    tail -n 30 "$LOG" >&2 || true
    exit 1
  fi
  if (( $(date +%s) - start_t > READY_TIMEOUT )); then
    say "Phoenix not healthy after ${READY_TIMEOUT}s; last log lines:"
    tail -n 30 "$LOG" >&2 || true
    exit 1
  fi
  sleep 0.5
done
say "healthy: install ${install_s}s, start $(( $(date +%s) - start_t ))s, total $(elapsed)s"
echo "export EVALTRACE_PHOENIX_URL=$URL EVALTRACE_PHOENIX_GRPC=http://127.0.0.1:${GRPC_PORT}"
