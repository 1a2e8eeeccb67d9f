#!/usr/bin/env bash
# The limits of plumb's own delay line (--emulator plumb: a TUN device in
# each namespace of --topology veth, one thread of the client's process
# between them), against the plain veth pair on the same host. Writes the
# "delayline" section of BENCHMARKS.md. Needs root (namespaces, TUN).
#
#   bench/delayline.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 10 s)
#
# Cases, rotating in order with each repetition:
#   a) stream, 1 flow, delay 0: through the delay line, and over the veth
#      pair with nothing emulated; the delay line's CPU per GB moved.
#   b) stream, 8 flows (8 threads), delay 0: the same.
#   c) rr, 1 flow, 1-byte messages, at --delay 1ms and --delay 10ms (each
#      way): the round trip's p50 and p99 against twice the asked delay,
#      and their spread (p99 - p50) as the jitter the line adds.
# A run whose throughput approaches the ceiling of case a) or b) says so in
# its output (the delay line busy 90 % of the window or more).
. "$(dirname "$0")/lib.sh"
REPS=${1:-5}
SECS=${2:-10}
PEERS=${PEERS:-none} # no peer has a delay line of its own to compare with
bench_setup

run() { # NAME ARGS...: one run's record into $work/NAME-$rep.json
  local name=$1
  shift
  "$PLUMB" run "$@" --topology veth --json --iterations 1 --no-store \
    --duration "${SECS}s" --warmup 1s >"$work/$name-$rep.json"
}

cases=(
  "line-1 stream --emulator plumb"
  "veth-1 stream"
  "line-8 stream --emulator plumb --flows 8 --threads 8"
  "veth-8 stream --flows 8 --threads 8"
  "rr-1ms rr --emulator plumb --delay 1ms"
  "rr-10ms rr --emulator plumb --delay 10ms"
)
bench_rotate "$REPS" "${cases[@]}"

# The host's own timer: how late a 1 ms sleep wakes, the floor under any
# delay a process can hold packets for.
python3 - >"$work/timer.txt" <<'PY'
import time
d = []
for _ in range(2000):
    t = time.perf_counter(); time.sleep(0.001); d.append((time.perf_counter() - t - 0.001) * 1e6)
d.sort()
print(f"{d[1000]:.0f} {d[1980]:.0f}")
PY

section=$(mktemp)
python3 - "$work" "$REPS" "$SECS" "$(uname -r)" "$(nproc)" >"$section" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, kernel, cpus = sys.argv[1:]
def recs(name):
    return [json.load(open(f"{work}/{name}-{rep}.json")) for rep in range(1, int(reps) + 1)]
def med(xs):
    return statistics.median(xs), min(xs), max(xs)
def fmt(m, scale=1.0, unit="", places=None):
    f = (lambda x: f"{x:.{places}f}") if places is not None else (lambda x: f"{x:.3g}")
    return f"{f(m[0]/scale)}{unit} ({f(m[1]/scale)}-{f(m[2]/scale)})"
print("## delayline: plumb's own delay line\n")
print(f"`bench/delayline.sh {reps} {secs}`: --topology veth on one host, kernel {kernel}, "
      f"{cpus} CPUs, release build; medians of {reps} runs of {secs} s (min-max), "
      "the cases rotating. The same flows and threads for the delay line and the plain veth pair. "
      "line/veth is the geometric mean of the repetitions' ratios with its 95 % Student-t "
      "interval; a difference is called only where it leaves 1 out.\n")
print("| case | delay line | veth pair | line/veth [95 % interval] | called | delay line CPU s per GB |")
print("|---|---|---|---|---|---|")
for n, label in [("1", "stream, 1 flow, delay 0"), ("8", "stream, 8 flows, 8 threads, delay 0")]:
    line, veth = recs(f"line-{n}"), recs(f"veth-{n}")
    bl = [r["iterations"][0]["derived"]["throughput_bps"] for r in line]
    bv = [r["iterations"][0]["derived"]["throughput_bps"] for r in veth]
    cpu = [r["iterations"][0]["client"]["path_cpu_s"] / (r["iterations"][0]["transfer"]["received_bytes"] / 1e9) for r in line]
    ri = ratio_interval(list(zip(bv, bl)))
    r = "-" if ri is None else f"{ri[0]:.2f} [{ri[1]:.2f}, {ri[2]:.2f}]"
    print(f"| {label} | {fmt(med(bl), 1e9, ' Gbit/s')} | {fmt(med(bv), 1e9, ' Gbit/s')} | "
          f"{r} | {called(ri)} | {fmt(med(cpu))} |")
print()
print("| case | asked round trip | p50 | p99 | p99 - p50 |")
print("|---|---|---|---|---|")
for name, rtt in [("rr-1ms", 2000), ("rr-10ms", 20000)]:
    rs = recs(name)
    p50 = [r["iterations"][0]["client"]["latency"]["p50_us"] for r in rs]
    p99 = [r["iterations"][0]["client"]["latency"]["p99_us"] for r in rs]
    jit = [b - a for a, b in zip(p50, p99)]
    us = lambda xs: fmt(med(xs), 1, " us", 0)
    print(f"| rr, 1 flow, delay {rtt//2000} ms each way | {rtt} us | {us(p50)} | {us(p99)} | {us(jit)} |")
timer_p50, timer_p99 = open(f"{work}/timer.txt").read().split()
print()
print(f"This host's timer alone: a 1 ms sleep wakes {timer_p50} us late at p50 and {timer_p99} us at p99 "
      "(2000 sleeps). The delay line wakes 200 us before a release and waits the rest out on the CPU, "
      "so only wake-ups later than that reach a packet, once each way.\n")
print("The delay line's thread also carries the receiving namespace's network stack for each packet "
      "it writes (a TUN write is received in the writer's context), so its CPU per GB includes that "
      "softirq work, which over the veth pair is the sender's.")
PY
write_section "$OUT" "## delayline:" "$section"
