#!/usr/bin/env bash
# What latency-under-load's probes cost the loads they measure, where the
# cost can show: four CUBIC bulk flows over an unshaped veth pair (no
# shaper, no qdisc of plumb's: the ends are CPU-bound), alone, and with
# every probe of `plumb run load` beside them (an open-loop rr of 20 a
# second, a UDP rr of 20 a second, 20 connect probes a second over 16
# flows, and 20 self probes a second inside the bulk flows). Both sample
# the bulk flows' TCP state every 100 ms, as every TCP run does. Writes the
# "probes" section of BENCHMARKS.md.
#
#   bench/probes.sh [REPS] [SECONDS]      (defaults: 8 repetitions, 5 s)
#
# Each repetition runs both cases, starting one case further each time
# (bench_rotate). Probed against alone is the geometric mean of the
# repetitions' ratios of the bulk flows' throughput, and of their host CPU
# per GB (inverted: above 1, the probes cost nothing), with 95 % Student-t
# intervals, called only where an interval leaves 1 out. Needs root (the
# veth pair's namespaces).
. "$(dirname "$0")/lib.sh"
REPS=${1:-8}
SECS=${2:-5}
bench_local

BULK="flows=4:cc=cubic"
CASES=(
  "alone stream --topology veth --flows 4 --cc cubic"
  "probed rr --rate 20 --topology veth --part up=stream:$BULK:self_probes=20
   --part udp=udp-rr:rate=20 --part connect=crr:rate=20:flows=16"
)
run() { bench_record "$@"; }
bench_rotate "$REPS" "${CASES[@]}"

section=$work/section.md
python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" "$BULK" >"$section" <<'PY'
import statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, shown, spread
from record import iteration, machine
work, reps, secs, version, bulk = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def figures(name, rep):
    """The bulk flows' (Gbit/s, host busy CPU-s per GB they moved)."""
    it = iteration(work, name, rep)
    if it is None:
        return None
    bulk = it if name == "alone" else next((p for p in it["parts"] if p["name"] == "up"), None)
    if bulk is None:
        return None
    gb = bulk["server"]["bytes_received"] / 1e9
    return bulk["derived"]["throughput_bps"] / 1e9, it["derived"]["host_busy_s"] / gb

got = {c: {r: figures(c, r) for r in range(1, reps + 1)} for c in ("alone", "probed")}
both = [r for r in range(1, reps + 1) if got["alone"][r] and got["probed"][r]]
out = ["## probes: what latency under load's probes cost the loads", ""]
out.append(f"Run by `bench/probes.sh {reps} {secs}` with `{version}` on {machine()}: "
           f"four CUBIC flows over an unshaped veth pair (`--topology veth`, no shaper), "
           f"`plumb run stream --flows 4 --cc cubic` alone against `plumb run rr --rate 20 "
           f"--part up=stream:{bulk}:self_probes=20 --part udp=udp-rr:rate=20 "
           f"--part connect=crr:rate=20:flows=16` (every probe of `plumb run load`: 80 a "
           f"second in all), {reps} repetitions of {secs} s after 1 s of warm-up, the cases "
           "rotating; both sample the flows' TCP state every 100 ms. Medians with min-max of "
           "the bulk flows' throughput and of the host's busy CPU per GB they moved. Probed "
           "against alone is the geometric mean of each repetition's ratio with its 95 % "
           "Student-t interval; per CPU is the inverse ratio of CPU per GB (below 1: the probes "
           f"cost CPU). {len(both)} of {reps} repetitions had both runs.")
out.append("")
out.append("| case | bulk Gbit/s | host CPU-s/GB |")
out.append("|---|---|---|")
for c in ("alone", "probed"):
    ok = [got[c][r] for r in range(1, reps + 1) if got[c][r]]
    if not ok:
        out.append(f"| {c} | failed | failed |")
        continue
    out.append(f"| {c} | {spread([x[0] for x in ok], '{:.2f}')} | {spread([x[1] for x in ok], '{:.4f}')} |")
out.append("")
rate = ratio_interval([(got["alone"][r][0], got["probed"][r][0]) for r in both])
cpu = ratio_interval([(got["probed"][r][1], got["alone"][r][1]) for r in both])
out.append(f"Probed against alone: throughput {shown(rate, 'faster', 'slower')}; "
           f"per CPU {shown(cpu, 'cheaper', 'dearer')}.")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## probes: " "$section"
