#!/usr/bin/env bash
# Regenerate every log of tests/fixtures/realruns from real frameworks on CPU
# (torch, transformers, accelerate; tiny models from configs, synthetic
# tokens, no downloads). Each run takes seconds. Run from anywhere:
#     bash scripts/realruns/make_all.sh [NAME ...]      # default: all
# Each line below is exactly how the log was captured, the way a user
# captures a run (`> log 2>&1`, or `2>&1 | tee log`). Many of these runs
# fail on purpose; a run whose exit status is not the expected one is
# reported and the script exits 1. Logs carry this machine's real
# timestamps, pids and file paths in tracebacks: they are real output.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
S=scripts/realruns
OUT=tests/fixtures/realruns
mkdir -p "$OUT"
PY="${PYTHON:-python}"
TORCHRUN="${TORCHRUN:-torchrun}"
export PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset TORCH_LOGS
status=0

# run NAME EXPECTED_RC COMMAND...: COMMAND writes $OUT/NAME.log itself.
run() {
    local name=$1 want=$2
    shift 2
    if [ "${#WANT[@]}" -gt 0 ] && [[ ! " ${WANT[*]} " == *" $name "* ]]; then return; fi
    printf '%-34s ' "$name"
    local t0=$SECONDS
    # A subshell with stderr closed: every command sends its own output to
    # its log, and the shell's "Segmentation fault" job notice is not news.
    (bash -c "$*"; exit $?) 2>/dev/null
    local rc=$?
    [ "$rc" = 127 ] && echo "  !! $name: command not found: $*" >&2
    local size
    size=$(wc -c < "$OUT/$name.log")
    printf 'exit %-4s %4ss %7s bytes\n' "$rc" "$((SECONDS - t0))" "$size"
    if [ "$rc" != "$want" ]; then
        echo "  !! $name: expected exit $want, got $rc" >&2
        status=1
    fi
}
WANT=("$@")

run hf_trainer_slowdown 0 "$PY $S/hf_trainer_slowdown.py > $OUT/hf_trainer_slowdown.log 2>&1"
run hf_trainer_crash 1 "$PY $S/hf_trainer_crash.py > $OUT/hf_trainer_crash.log 2>&1"
# tqdm redraws only around the dict lines: its redraw at exit shows a later count than the last before the crash.
run hf_trainer_crash_exit_redraw 1 "TQDM_MININTERVAL=5 $PY $S/hf_trainer_crash.py > $OUT/hf_trainer_crash_exit_redraw.log 2>&1"
run torchrun_ddp_rank_dies 1 "$TORCHRUN --nproc_per_node=2 $S/ddp_rank_dies.py > $OUT/torchrun_ddp_rank_dies.log 2>&1"
run torchrun_ddp_rank_dies_tee 1 "$TORCHRUN --nproc_per_node=2 --tee 3 $S/ddp_rank_dies.py > $OUT/torchrun_ddp_rank_dies_tee.log 2>&1"
run torchrun_ddp_rank_dies_record 1 "$TORCHRUN --nproc_per_node=2 $S/ddp_rank_dies.py --record > $OUT/torchrun_ddp_rank_dies_record.log 2>&1"
# Step lines print()ed, stdout block-buffered (as users run it): rank 0's steps reach the log after its traceback.
run torchrun_ddp_print_buffered 1 "env -u PYTHONUNBUFFERED $TORCHRUN --nproc_per_node=2 --tee 3 $S/ddp_rank_dies.py --print --die-rank 0 > $OUT/torchrun_ddp_print_buffered.log 2>&1"
run compile_recompiles 0 "TORCH_LOGS=recompiles $PY $S/compile_recompiles.py > $OUT/compile_recompiles.log 2>&1"
run compile_recompile_limit_fatal 1 "TORCH_LOGS=recompiles $PY $S/compile_recompiles.py --fail-on-limit > $OUT/compile_recompile_limit_fatal.log 2>&1"
# pipefail: the exit status is python's, not tee's.
run tee_script_crash 1 "set -o pipefail; $PY $S/tee_script_crash.py 2>&1 | tee $OUT/tee_script_crash.log > /dev/null"
run caught_traceback_survives 0 "$PY $S/caught_traceback_survives.py > $OUT/caught_traceback_survives.log 2>&1"
# 139 = 128 + SIGSEGV; exec keeps bash's own "Segmentation fault" notice out of the log.
run faulthandler_segfault 139 "exec $PY $S/faulthandler_segfault.py > $OUT/faulthandler_segfault.log 2>&1"
run host_oom 1 "$PY $S/host_oom.py > $OUT/host_oom.log 2>&1"
run host_oom_numpy 1 "$PY $S/host_oom.py --numpy > $OUT/host_oom_numpy.log 2>&1"
exit $status
