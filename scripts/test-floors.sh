#!/usr/bin/env bash
# The floor job: daotai with every dependency at the lowest version pyproject.toml allows (its
# ">=" floors pinned by scripts/floors.py; what those need in turn at pip's newest), for the base
# install and the extras named in DAOTAI_FLOOR_EXTRAS (default neural,server,usd), then a stated
# subset of the suite that reaches every dependency's API daotai uses:
#   script, CLI, schema      pydantic, typer, rich, pyyaml
#   encode, audio, previz    numpy, av, opencv-python-headless, moderngl, pillow
#   a render with sound and camera QC (test_audio_pipeline, test_camera_metrics)
#   timeline export          opentimelineio and its FCP XML / CMX EDL adapters
#   LLM drafter client       httpx
#   HTTP service             fastapi, uvicorn, python-multipart
#   USD cameras              usd-core
#   tiny Wan / LTX           diffusers, transformers, accelerate, safetensors, huggingface_hub,
#                            tokenizers, sentencepiece, ftfy, peft
# The tiny MiniMax-H3 tests are left out here: without torchvision (none matches this CPU torch)
# their Qwen3-VL video path needs a transformers class that is new in 5.20, above the floor; H3
# itself ran on transformers 5.17 with torchvision on the CUDA box (docs/environments.md).
# torch stays at 2.13.0, the CPU wheel this machine has: torch's own floor (2.4) would be a
# multi-GB CUDA download, so it is not installed here (docs/environments.md says what was run).
# Extra arguments go to pytest. Idempotent: the venv is rebuilt only when the floors change.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS=${DAOTAI_FLOOR_EXTRAS-neural,server,usd}
VENV=.venv-floors
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
constraints="$VENV/floors.txt"
# shellcheck disable=SC2086
"$VENV/bin/python" scripts/floors.py ${EXTRAS//,/ } | sed 's/^torch==.*/torch==2.13.0/' > "$constraints.new"
stamp="$VENV/.daotai-floors"
hash=$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read() + open("pyproject.toml", "rb").read()).hexdigest())' "$constraints.new")
mv "$constraints.new" "$constraints"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ]; then
  echo "test-floors: installing daotai[$EXTRAS] at its floors ($(wc -l < "$constraints") pins)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  target=.
  [ -n "$EXTRAS" ] && target=".[$EXTRAS]"
  "$VENV/bin/python" -m pip install -q -c "$constraints" -e "$target" \
    pytest pytest-timeout pytest-xdist hypothesis jsonschema openai
  echo "$hash" > "$stamp"
fi
# Say what was installed: a floor pip could not honour would show here as another version.
"$VENV/bin/python" - "$constraints" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version


def release(text: str) -> tuple[int, ...]:
    """1.26 == 1.26.0; a local tag (+cpu) and trailing zeros do not count."""
    parts = [int(p) for p in text.split("+")[0].split(".") if p.isdigit()]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


wrong = []
for line in open(sys.argv[1]):
    pin = line.split(";")[0].strip()
    if not pin:
        continue
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        wrong.append(f"{name} is not installed")
        continue
    if release(have) != release(want):
        wrong.append(f"{name} {have} (floor {want})")
print("test-floors: " + ("every pinned dependency at its floor" if not wrong else "; ".join(wrong)), file=sys.stderr)
sys.exit(1 if wrong else 0)
PY

tests=(
  tests/test_script.py tests/test_script_cli.py tests/test_cli.py
  tests/test_encode.py tests/test_audio_qc.py tests/test_audio_pipeline.py tests/test_audio_uploads.py
  tests/test_previz_render.py tests/test_camera_metrics.py
  tests/test_timeline_export.py tests/test_draft_llm.py
  tests/test_server_api.py tests/test_camera_files.py
  tests/test_neural_render.py
)
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${DAOTAI_TEST_WORKERS:-2}" --dist loadfile "${tests[@]}" "$@"
status=$?
set -e
if [ "$status" = 5 ]; then
  echo "test-floors: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
