#!/usr/bin/env bash
# Two builds of plumb side by side on the cases of peers.sh, rr.sh and
# scale.sh, alternating which goes first with each repetition, so that a
# change inside plumb (a restructuring, a new code path) is measured against
# the code before it on the same machine in the same minutes. Each case's
# figure is the one its script reports for plumb: Gbit/s for stream,
# transactions per second for rr, udp-rr and the many-flow cases, the
# receiver's Gbit/s for udp-stream; beside it
# the same work per busy CPU-second of the host (the record's host_busy_s).
#
#   bench/ab.sh OLD_PLUMB NEW_PLUMB [REPS [SECS]]
#
# ONLY="rr-pinned rr-uring-pinned" runs those cases alone (the section says
# which ran). The pinned cases put one flow's client on CPU 0 and its server
# on CPU 1, so that a change in the data path is not lost in where the
# scheduler put the threads.
#
# OLD_NAME and NEW_NAME name the builds in the section (default: their
# --version, which names no commit in builds older than that flag's).
# Writes the "## ab:" section of $OUT (BENCHMARKS.md).
. "$(dirname "$0")/lib.sh"
OLD=${1:?usage: bench/ab.sh OLD_PLUMB NEW_PLUMB [REPS [SECS]]}
NEW=${2:?usage: bench/ab.sh OLD_PLUMB NEW_PLUMB [REPS [SECS]]}
REPS=${3:-5}
SECS=${4:-5}
for b in "$OLD" "$NEW"; do
  [[ -x $b ]] || { echo "bench/ab.sh: '$b' is not an executable" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name|workload and flags; the same threads, flows and engine for both builds
# (the engine named: `--io auto` chooses by the host, and older builds have
# no auto).
CASES=(
  "stream-a|stream --msg-size 128K --io epoll"
  "stream-b|stream --flows 32 --threads 2 --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv --io epoll"
  "rr|rr --io epoll"
  "udp-rr|udp-rr --io epoll"
  "udp-stream|udp-stream --msg-size 1472 --io epoll"
  "rr-1000|rr --flows 1000 --threads 2 --io epoll"
  "crr-1000|crr --flows 1000 --threads 2 --io epoll"
  "rr-10000|rr --flows 10000 --threads 2 --io epoll"
  "stream-pinned|stream --msg-size 128K --client-cpus 0 --server-cpus 1 --io epoll"
  "rr-pinned|rr --client-cpus 0 --server-cpus 1 --io epoll"
  "rr-uring-pinned|rr --io uring --client-cpus 0 --server-cpus 1"
  "crr-pinned|crr --client-cpus 0 --server-cpus 1 --io epoll"
  "crr-uring-pinned|crr --io uring --client-cpus 0 --server-cpus 1"
  "crr-server-fin-pinned|crr --close server-fin --client-cpus 0 --server-cpus 1 --io epoll"
)
if [[ -n ${ONLY:-} ]]; then
  picked=()
  for c in "${CASES[@]}"; do
    [[ " $ONLY " == *" ${c%%|*} "* ]] && picked+=("$c")
  done
  (( ${#picked[@]} )) || { echo "bench/ab.sh: ONLY='$ONLY' names no case" >&2; exit 2; }
  CASES=("${picked[@]}")
fi

for rep in $(seq 1 "$REPS"); do
  if (( rep % 2 )); then order=(old new); else order=(new old); fi
  for c in "${CASES[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    for who in "${order[@]}"; do
      bin=$OLD; [[ $who == new ]] && bin=$NEW
      "$bin" run "${args[@]}" --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s \
        >"$work/$who-$name-$rep.json" 2>"$work/$who-$name-$rep.err" || true
    done
  done
done

section=$work/section.md
python3 - "$work" "$REPS" "$SECS" "${OLD_NAME:-$("$OLD" --version)}" "${NEW_NAME:-$("$NEW" --version)}" "${CASES[@]}" >"$section" <<'PY'
import json, math, os, platform, statistics, sys
work, reps, secs, old_v, new_v = sys.argv[1:6]
cases = [c.split("|", 1) for c in sys.argv[6:]]
reps = int(reps)

def figure(path):
    """The rate, its unit, and the work per busy CPU-second of the host."""
    try:
        it = json.load(open(path))["iterations"][0]
    except Exception:
        return None
    d = it["derived"]
    busy = d.get("host_busy_s") or 0
    rate, unit = (d["tps"], "tx/s") if d.get("tps") else (d["throughput_bps"] / 1e9, "Gbit/s")
    per_cpu = rate * it["window_s"] / busy if busy > 0 else None
    return rate, unit, per_cpu

cpus = os.cpu_count()
model = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        model = line.split(":", 1)[1].strip()
        break
out = ["## ab: plumb before and after a change, same cases, alternating", ""]
only = os.environ.get("ONLY", "")
only = f"ONLY='{only}' " if only else ""
out.append(f"Run by `{only}bench/ab.sh OLD NEW {reps} {secs}` on {cpus} CPUs ({model}), kernel "
           f"{platform.release()}. OLD is `{old_v}`, NEW is `{new_v}`. {reps} repetitions of "
           f"{secs} s (after 1 s of warm-up) per build and case, the build that goes first "
           "alternating with each repetition; each case gives both builds the same flows and "
           "threads. Medians with min-max in brackets. NEW/OLD is the geometric mean of the "
           "repetitions' ratios (each repetition runs both builds back to back), with its 95 % "
           "Student-t interval over the repetitions, and beside it the median of those ratios; "
           "a difference is called only where the interval leaves 1 out. Per CPU is the same work per busy CPU-second of the host "
           "over the window (each record's `host_busy_s`: every CPU's time less its idle, "
           "iowait and steal).")
out.append("")
out.append("| case | plumb run | OLD | NEW | NEW/OLD [95 % interval] | median ratio | called "
           "| per CPU NEW/OLD [95 % interval] | called |")
out.append("|---|---|---|---|---|---|---|---|---|")

sys.path.insert(0, "bench")
from ratio import called, ratio_interval
for name, args in cases:
    got = {}
    unit = ""
    by_rep = {}
    for who in ("old", "new"):
        v = []
        for rep in range(1, reps + 1):
            f = figure(os.path.join(work, f"{who}-{name}-{rep}.json"))
            if f:
                v.append(f[0])
                by_rep.setdefault(rep, {})[who] = f
                unit = f[1]
        got[who] = v
    if not got["old"] or not got["new"]:
        out.append(f"| {name} | `{args}` | failed | failed | - | - | - | - | - |")
        continue
    def num(x):
        return f"{x:,.0f}" if unit == "tx/s" else f"{x:.2f}"
    def cell(v):
        return f"{num(statistics.median(v))} [{num(min(v))}-{num(max(v))}] {unit}"
    def compared(k, above, below):
        pairs = [(r["old"][k], r["new"][k]) for r in by_rep.values()
                 if "old" in r and "new" in r and r["old"][k] and r["new"][k]]
        ri = ratio_interval(pairs)
        median = f"{statistics.median(n / o for o, n in pairs):.3f}" if pairs else "-"
        if ri is None:
            return "too few repetitions", median, "-"
        return f"{ri[0]:.3f} [{ri[1]:.3f}, {ri[2]:.3f}]", median, called(ri, above, below)
    rate, rate_median, rate_called = compared(0, "faster", "slower")
    per_cpu, _, per_called = compared(2, "cheaper", "dearer")
    out.append(f"| {name} | `{args}` | {cell(got['old'])} | {cell(got['new'])} | "
               f"{rate} | {rate_median} | {rate_called} | {per_cpu} | {per_called} |")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## ab: " "$section"
