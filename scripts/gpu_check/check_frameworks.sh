#!/usr/bin/env bash
# The probe inside torch.compile (inductor), the HF Trainer and Lightning on
# the GPU, and replay of the compiled loop's log (its recompiles):
#   scripts/gpu_check/check_frameworks.sh OUT_DIR
# Output in OUT_DIR/frameworks.tgz; a summary on stdout. DEVICE=cpu (with
# BACKEND=eager) tries it on a machine without a GPU; PARTS="hf" runs one part.
set -u
OUT=${1:?usage: check_frameworks.sh OUT_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
BACKEND=${BACKEND:-inductor}
W=$(mktemp -d)
mkdir -p "$OUT"
cd "$ROOT" || exit 2
for part in ${PARTS:-compile hf lightning}; do
    mkdir -p "$W/$part"
    T0=$SECONDS
    env -u PYTHONUNBUFFERED TORCH_LOGS=recompiles timeout 240 $PY scripts/gpu_check/frameworks_cuda.py "$part" \
        "$W/$part" --device "$DEVICE" --backend "$BACKEND" > "$W/$part/run.log" 2>&1
    echo "== $part rc=$? in $((SECONDS - T0)) s"
    tail -n 3 "$W/$part/run.log" | cut -c1-300
    timeout 60 $PY -m dflash_watch replay "$W/$part/run.log" --json > "$W/$part/replay.jsonl" 2> "$W/$part/replay.err"
    echo "replay rc=$?"; cut -c1-400 "$W/$part/replay.jsonl"
    $PY - "$W/$part/dflash-probe-rank0.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("probe lines:", len(lines), "steps", [l["step"] for l in lines][:3], "...", lines[-1]["step"] if lines else None)
keys = sorted({k for l in lines for k in l})
print("probe keys:", keys)
if lines:
    print("probe last:", json.dumps(lines[-1])[:600])
PY
done
tar czf "$OUT/frameworks.tgz" -C "$W" .
rm -rf "$W"
