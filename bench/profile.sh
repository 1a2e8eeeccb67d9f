#!/usr/bin/env bash
# What --profile costs: a 1-flow stream (throughput, CPU per GB of both
# ends) and a 1-flow rr (transactions per second), each run with and
# without --profile at the default 997 Hz, alternating. Writes the
# "profile" section of BENCHMARKS.md. Needs root (perf_event_open on every
# CPU).
#
#   bench/profile.sh [REPS] [SECONDS]      (defaults: 7 repetitions, 5 s)
#
# Both sides run the same flows (1) and threads (1) on the same CPUs, each
# case unpinned and, where there are two CPUs, pinned (client on CPU 0,
# server on CPU 1).
. "$(dirname "$0")/lib.sh"
REPS=${1:-7}
SECS=${2:-5}
PEERS=${PEERS:-none} # no peer profiles its own runs
bench_setup

run() { # NAME ARGS...: one run's record into $work/NAME-$rep.json
  local name=$1
  shift
  "$PLUMB" run "$@" --json --iterations 1 --no-store \
    --duration "${SECS}s" --warmup 1s >"$work/$name-$rep.json"
}

pins=(unpinned)
if (($(nproc) >= 2)); then pins+=(pinned); fi
cases=()
for p in "${pins[@]}"; do
  pin=""
  [[ $p == pinned ]] && pin="--client-cpus 0 --server-cpus 1"
  for w in stream rr; do
    cases+=("$w-off-$p $w $pin" "$w-on-$p $w --profile $pin")
  done
done
bench_rotate "$REPS" "${cases[@]}"

section=$(mktemp)
python3 - "$work" "$REPS" "$SECS" "$(uname -r)" "$(nproc)" "${pins[@]}" >"$section" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, kernel, cpus, *pins = sys.argv[1:]
reps = int(reps)
def recs(name):
    return [json.load(open(f"{work}/{name}-{rep}.json"))["iterations"][0] for rep in range(1, reps + 1)]
def fmt(xs, scale=1.0, unit=""):
    return f"{statistics.median(xs)/scale:.3g}{unit} [{min(xs)/scale:.3g}-{max(xs)/scale:.3g}]"
def host_cpu_per_gb(it):
    """Every CPU's busy seconds in the window per GB received, as the
    record counts them (`derived.host_cpu_s_per_gb`)."""
    return it["derived"]["host_cpu_s_per_gb"]
on = [it for p in pins for it in recs(f"stream-on-{p}")]
event = on[0]["client"]["profile"]["event"]
lost = sum(it[e]["profile"]["lost"] for it in on for e in ("client", "server"))
print("## profile: what --profile costs\n")
print(f"`bench/profile.sh {reps} {secs}`: loopback, kernel {kernel}, {cpus} CPUs, "
      f"{' and '.join(pins)} (pinned: --client-cpus 0 --server-cpus 1), release build; "
      f"medians of {reps} runs of {secs} s [min-max], the cases rotating. 1 flow and 1 thread on "
      f"each end in every case; --profile samples every CPU at 997 Hz with {event} ({lost} samples "
      "lost over all the profiled stream runs). Each CPU is sampled once: the client's samplers "
      "make the embedded server's profile too. with/without is the geometric mean of "
      "the repetitions' ratios with its 95 % Student-t interval; a difference is called only where "
      "the interval leaves 1 out.\n")
faster = []
print("| case | without --profile | with --profile | with/without [95 % interval] | called |")
print("|---|---|---|---|---|")
for p in pins:
    for name, label, key, scale, unit in [
        ("stream", "stream throughput", lambda it: it["derived"]["throughput_bps"], 1e9, " Gbit/s"),
        ("stream", "stream host busy CPU s per GB", host_cpu_per_gb, 1, ""),
        ("rr", "rr transactions/s", lambda it: it["client"]["transactions"] / it["window_s"], 1, ""),
    ]:
        off = [key(it) for it in recs(f"{name}-off-{p}")]
        on_ = [key(it) for it in recs(f"{name}-on-{p}")]
        ri = ratio_interval(list(zip(off, on_)))
        r = "-" if ri is None else f"{ri[0]:.3f} [{ri[1]:.3f}, {ri[2]:.3f}]"
        print(f"| {label}, {p} | {fmt(off, scale, unit)} | {fmt(on_, scale, unit)} | {r} | "
              f"{called(ri, 'more', 'less')} |")
        if ri is not None and ri[1] > 1 and "CPU" not in label:
            faster.append(f"{label}, {p}")
prof = [it["client"]["process"]["threads"] for it in on]
pt = [sum(t["user_s"] + t["system_s"] for t in ts if t["name"] == "plumb-profile") for ts in prof]
print(f"\nThe client's sampling thread (`plumb-profile`, off the ends' CPUs where there is one "
      f"to spare) took {statistics.median(pt):.3f} CPU s per {secs} s window (median); "
      "naming and folding the samples happens after the window closes.")
if faster:
    print(f"\nWhere a rate is higher with --profile ({', '.join(faster)}), the likely cause is the sampling timer "
          "itself: firing on every CPU about a thousand times a second, it keeps an idle CPU from "
          "sleeping deeply (a virtual CPU from halting), so a woken end runs sooner. Compare "
          "profiled runs with profiled runs.")
PY
write_section "$OUT" "## profile:" "$section"
