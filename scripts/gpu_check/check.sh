#!/usr/bin/env bash
# The GPU check, one prepared run on a machine with an NVIDIA GPU:
#   scripts/gpu_check/check.sh OUT_DIR
# 1. nvidia-smi, for reference;
# 2. the real NVML reads and the Xid event wait (nvml_check.py);
# 3. the health reads' cost (benchmarks/bench_nvml_reads.py --real);
# 4. live: `dflash-watch headless` started before the log exists, beside a
#    CUDA training job (train_cuda.py, PYTHONUNBUFFERED unset, so its log
#    comes in block-buffered bursts) that fills the GPU's memory and then
#    dies of a real CUDA out-of-memory; NVML sampled and recorded;
# 5. replay of the same log and recorded samples, to compare with live.
# Everything lands in OUT_DIR/gpu_check.tgz; a summary goes to stdout.
# DEVICE=cpu tries the same on a machine without a GPU (no NVML, no OOM).
set -u
OUT=${1:?usage: check.sh OUT_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
W=$(mktemp -d)
mkdir -p "$W/files" "$OUT"
F=$W/files
cd "$ROOT" || exit 2

(nvidia-smi; nvidia-smi -q) > "$F/nvidia-smi.txt" 2>&1
echo "== nvml_check"
timeout 60 $PY scripts/gpu_check/nvml_check.py > "$F/nvml.jsonl" 2>&1; echo "nvml_check rc=$?"
cut -c1-600 "$F/nvml.jsonl"
echo "== bench_nvml_reads --real"
timeout 120 $PY benchmarks/bench_nvml_reads.py --real --samples 200 > "$F/bench_nvml.txt" 2>&1; echo "bench rc=$?"
tail -n 12 "$F/bench_nvml.txt"

echo "== live: headless beside a CUDA job"
L=$W/run
mkdir -p "$L"
env -u PYTHONUNBUFFERED $PY -m dflash_watch headless --log "$L/train.log" --record-gpu "$L/gpu.jsonl" \
    > "$F/live.jsonl" 2> "$F/headless.err" &
HP=$!
sleep 3
T0=$(date +%s)
env -u PYTHONUNBUFFERED timeout 240 $PY scripts/gpu_check/train_cuda.py "$L" --device "$DEVICE" \
    > "$L/train.log" 2>&1
echo "train rc=$? after $(( $(date +%s) - T0 )) s"
sleep 12
kill -INT $HP; wait $HP; echo "headless rc=$?"
echo "== replay"
G=(); [ -s "$L/gpu.jsonl" ] && G=(--gpu-samples "$L/gpu.jsonl")
timeout 120 $PY -m dflash_watch replay "$L/train.log" "${G[@]}" --json \
    > "$F/replay.jsonl" 2> "$F/replay.err"; echo "replay rc=$?"
cp "$L"/* "$F/"
echo "== summary"
$PY - "$F" <<'PY'
import json, sys, os
f = sys.argv[1]
def alerts(name):
    out = []
    for line in open(os.path.join(f, name)):
        try:
            a = json.loads(line)
        except ValueError:
            continue
        out.append((a.get("detector"), a.get("kind"), a.get("state"), a.get("gpu"), a.get("message", "")[:160]))
    return out
live, rep = alerts("live.jsonl"), alerts("replay.jsonl")
print("live alerts:"); [print("  ", a) for a in live]
print("replay alerts:"); [print("  ", a) for a in rep]
key = lambda xs: sorted((d, k, s, g) for d, k, s, g, _ in xs)
print("live == replay (detector, kind, state, gpu):", key(live) == key(rep))
g = os.path.join(f, "gpu.jsonl")
samples = [json.loads(l) for l in open(g) if l.strip()] if os.path.exists(g) else []
print("recorded samples:", len(samples))
if samples:
    print("first:", json.dumps(samples[0])[:700])
    top = max(s.get("used_bytes") or 0 for s in samples)
    whole = samples[0].get("total_bytes") or 0
    print(f"max used {top / 2**30:.1f} GiB of {whole / 2**30:.1f} GiB")
probe = os.path.join(f, "dflash-probe-rank0.jsonl")
if os.path.exists(probe):
    lines = [json.loads(l) for l in open(probe) if l.strip()]
    print("probe lines:", len(lines))
    if lines:
        print("probe last:", json.dumps(lines[-1])[:700])
print("headless stderr tail:"); print(open(os.path.join(f, "headless.err")).read()[-1500:])
print("train log tail:"); print(open(os.path.join(f, "train.log")).read()[-1200:])
PY
tar czf "$OUT/gpu_check.tgz" -C "$W" files
rm -rf "$W"
