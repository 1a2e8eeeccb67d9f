#!/usr/bin/env bash
# The static build (dist profile, x86_64-unknown-linux-musl) against the
# everyday build (release profile, glibc) on loopback, the two alternating
# so that drift hits both alike. An allocation or a slow libc call on a hot
# path would show here as a loss of the static build: musl's allocator and
# system-call wrappers are not glibc's. Writes the "static" section of
# BENCHMARKS.md.
#
#   bench/static.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 10 s)
#
# STATIC=path and EVERYDAY=path use binaries from elsewhere (then nothing is
# built); OUT=FILE writes the section to another file than BENCHMARKS.md.
#
# Cases (both binaries get the same flags, threads and flows):
#   a) stream: one flow of 128K writes, one thread
#   b) rr: 1000 flows of 1-byte requests and responses, 2 threads
# Reported per binary: the rate (bit/s or tx/s) and the rate per busy
# CPU-second of the host (/proc/stat, every CPU), medians with min-max, and
# the static build's ratio to the everyday one with its 95 % interval over
# the paired repetitions (bench/ratio.py).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
SECS=${2:-10}
OUT=${OUT:-BENCHMARKS.md}
target=x86_64-unknown-linux-musl
if [[ -z ${STATIC:-} ]]; then
  bash .ci/static-build >/dev/null
  STATIC=target/$target/dist/plumb
fi
if [[ -z ${EVERYDAY:-} ]]; then
  cargo build --release -q
  EVERYDAY=target/release/plumb
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PLUMB_ACTIVITY_DIR=off

run_case() { # binary-name, binary, case, rep
  local name=$1 bin=$2 case=$3 rep=$4
  local args=(--no-store --json --iterations 1 --duration "${SECS}s" --warmup 1s)
  case $case in
    stream) "$bin" run stream --flows 1 --threads 1 "${args[@]}" ;;
    rr) "$bin" run rr --flows 1000 --threads 2 "${args[@]}" ;;
  esac >"$work/$name-$case-$rep.json"
}

for rep in $(seq "$REPS"); do
  for case in stream rr; do
    # Which binary goes first alternates too.
    if ((rep % 2)); then order=(static everyday); else order=(everyday static); fi
    for name in "${order[@]}"; do
      if [[ $name == static ]]; then bin=$STATIC; else bin=$EVERYDAY; fi
      run_case "$name" "$bin" "$case" "$rep"
    done
  done
done

python3 - "$work" "$REPS" "$SECS" "$OUT" "$("$STATIC" --version)" "$("$EVERYDAY" --version)" <<'EOF'
import json, os, re, statistics, sys, platform
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, out, static_v, everyday_v = sys.argv[1:]
reps = int(reps)

def figures(name, case):
    """Per repetition: the rate, and the rate per busy CPU-second of the
    host (`derived.host_busy_s`: every CPU's time over the window less its
    idle, iowait and steal; everything the host spent on the test)."""
    rates, per_cpu = [], []
    for rep in range(1, reps + 1):
        r = json.load(open(f"{work}/{name}-{case}-{rep}.json"))
        it = r["iterations"][0]
        d = it["derived"]
        rate = d["tps"] if case == "rr" else d["throughput_bps"]
        busy = d["host_busy_s"]
        rates.append(rate)
        per_cpu.append(rate * it["window_s"] / busy if busy > 0 else 0.0)
    return rates, per_cpu

def show(v, case):
    if case == "rr":
        return f"{v/1e3:.1f} k tx/s"
    return f"{v/1e9:.2f} Gbit/s"

def cell(xs, case):
    return f"{show(statistics.median(xs), case)} [{show(min(xs), case)} .. {show(max(xs), case)}]"

def ratio(a, b):
    ri = ratio_interval(list(zip(a, b)))
    if ri is None:
        return "-", called(ri)
    return f"{ri[0]:.3f} [{ri[1]:.3f}, {ri[2]:.3f}]", called(ri)

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    "## static: the static build against the everyday build",
    "",
    f"`bash bench/static.sh {reps} {secs}`: {reps} repetitions of {secs} s per case, the two "
    "binaries alternating (and which goes first alternating), loopback, embedded server.",
    f"Machine: {os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}.",
    f"static: `{static_v}`; everyday: `{everyday_v}`.",
    "Both get the same flags: stream `--flows 1 --threads 1`, rr `--flows 1000 --threads 2`. "
    "Per CPU-second is the rate over the host's busy CPU seconds in the window (the record's "
    "`host_busy_s`: every CPU's time less its idle, iowait and steal; everything the host spent, "
    "receiver and softirq included; both builds must keep `span_s`, or the older counts ticks). Medians with min-max; static/everyday is the geometric mean of the "
    "repetitions' ratios (each repetition runs both binaries back to back) with its 95 % "
    "Student-t interval, and a difference is called only where the interval leaves 1 out.",
    "",
    "| case | figure | everyday | static | static/everyday [95 % interval] | called |",
    "|---|---|---|---|---|---|",
]
for case in ("stream", "rr"):
    er, ec = figures("everyday", case)
    sr, sc = figures("static", case)
    for name, e, st in [("rate", er, sr), ("per host CPU-s", ec, sc)]:
        r, c = ratio(e, st)
        lines.append(f"| {case} | {name} | {cell(e, case)} | {cell(st, case)} | {r} | {c} |")
section = "\n".join(lines) + "\n"
text = open(out).read() if os.path.exists(out) else "# Benchmarks\n\n"
pat = re.compile(r"^## static:.*?(?=^## |\Z)", re.S | re.M)
text = pat.sub(lambda m: section + "\n", text) if pat.search(text) else text.rstrip() + "\n\n" + section
open(out, "w").write(text)
print(section)
EOF
