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
# Reported per binary: the rate (bit/s or tx/s) and the rate per CPU-second
# of both plumb processes (client and server, user + system), medians with
# min-max, and the static build's ratio to the everyday one.
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
work, reps, secs, out, static_v, everyday_v = sys.argv[1:]
reps = int(reps)

def figures(name, case):
    rates, per_cpu = [], []
    for rep in range(1, reps + 1):
        r = json.load(open(f"{work}/{name}-{case}-{rep}.json"))
        it = r["iterations"][0]
        d = it["derived"]
        rate = d["tps"] if case == "rr" else d["throughput_bps"]
        cpu = sum(it[e]["process"]["user_s"] + it[e]["process"]["system_s"] for e in ("client", "server"))
        rates.append(rate)
        per_cpu.append(rate * it["window_s"] / cpu if cpu > 0 else 0.0)
    return rates, per_cpu

def show(v, case):
    if case == "rr":
        return f"{v/1e3:.1f} k tx/s"
    return f"{v/1e9:.2f} Gbit/s"

def cell(xs, case, unit=""):
    return f"{show(statistics.median(xs), case)}{unit} ({show(min(xs), case)} .. {show(max(xs), case)})"

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    "## static: the static build against the everyday build",
    "",
    f"`bash bench/static.sh {reps} {secs}`: {reps} repetitions of {secs} s per case, the two "
    "binaries alternating (and which goes first alternating), loopback, embedded server.",
    f"Machine: {os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}.",
    f"static: `{static_v}`; everyday: `{everyday_v}`.",
    "Both get the same flags: stream `--flows 1 --threads 1`, rr `--flows 1000 --threads 2`; "
    "per CPU-second is the rate over the user + system seconds of both plumb processes.",
    "",
    "| case | everyday rate | static rate | static/everyday | everyday per CPU-s | static per CPU-s | static/everyday |",
    "|---|---|---|---|---|---|---|",
]
for case in ("stream", "rr"):
    er, ec = figures("everyday", case)
    sr, sc = figures("static", case)
    ratio = statistics.median(sr) / statistics.median(er)
    cratio = statistics.median(sc) / statistics.median(ec)
    lines.append(
        f"| {case} | {cell(er, case)} | {cell(sr, case)} | {ratio:.2f} | "
        f"{cell(ec, case)} | {cell(sc, case)} | {cratio:.2f} |"
    )
section = "\n".join(lines) + "\n"
text = open(out).read() if os.path.exists(out) else "# Benchmarks\n\n"
pat = re.compile(r"^## static:.*?(?=^## |\Z)", re.S | re.M)
text = pat.sub(lambda m: section + "\n", text) if pat.search(text) else text.rstrip() + "\n\n" + section
open(out, "w").write(text)
print(section)
EOF
