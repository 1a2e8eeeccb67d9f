#!/usr/bin/env bash
# What the TCP probes cost: a 1-flow stream with every default probe,
# with the sampled TCP state (`tcp_series`) and the counting tracepoints
# (`tracepoints`) turned off (PLUMB_PROBES_OFF), and with every ACK read
# besides (`--tcp-probe`), rotating which goes first. The rate is the
# kernel's (lo's bytes over the window, from the record's interfaces) and
# the cost the host's busy CPU per GB (/proc/stat over the window, every
# CPU), both as each run's record has them. Writes the "## tcp:" section
# of BENCHMARKS.md. Root counts the tracepoints and reads tcp:tcp_probe;
# without it they are off in every case.
#
#   bench/tcp.sh [REPS] [SECONDS]      (defaults: 7 repetitions, 5 s)
#
# Every case runs the same flow (1) and threads (1 a side), the client on
# CPU 0 and the server on CPU 1 where there are two.
. "$(dirname "$0")/lib.sh"
REPS=${1:-7}
SECS=${2:-5}
PEERS=${PEERS:-none} # no peer samples TCP_INFO
bench_setup

pin=()
if (($(nproc) >= 2)); then pin=(--client-cpus 0 --server-cpus 1); fi
cases=(on off probe)
for rep in $(seq 1 "$REPS"); do
  for k in 0 1 2; do
    case=${cases[$(((rep + k) % 3))]}
    off= asked=()
    [[ $case == off ]] && off=tcp_series,tracepoints
    [[ $case == probe ]] && asked=(--tcp-probe)
    PLUMB_PROBES_OFF=$off "$PLUMB" run stream "${pin[@]}" "${asked[@]}" --json --iterations 1 \
      --no-store --duration "${SECS}s" --warmup 1s >"$work/$case-$rep.json"
  done
done

section=$(mktemp)
python3 - "$work" "$REPS" "$SECS" "${pin[*]:-unpinned}" >"$section" <<'PY'
import glob, json, os, platform, statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, pin = sys.argv[1:]
reps = int(reps)

def it(case, rep):
    return json.load(open(f"{work}/{case}-{rep}.json"))["iterations"][0]

def lo_bytes(i):
    return sum(x["tx_bytes"] for x in i["client"]["interfaces"] if x["name"] == "lo")

def rate(i):
    return lo_bytes(i) * 8 / i["client"]["window_s"] / 1e9

def busy_s(i):
    """Every CPU's busy seconds over the window (the host's, on loopback)."""
    return sum(c["user_s"] + c["nice_s"] + c["system_s"] + c["irq_s"] + c["softirq_s"] + c["steal_s"]
               for c in i["client"]["cpus"])

def busy_per_gb(i):
    return busy_s(i) / (lo_bytes(i) / 1e9)

def samples(i):
    return sum(len(i[e].get("tcp_series", {}).get("t_ms", [])) for e in ("client", "server"))

model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
on = [it("on", r) for r in range(1, reps + 1)]
off = [it("off", r) for r in range(1, reps + 1)]
traced = "counted" if "tracepoints" in on[0]["client"] else "not counted here (no privilege)"
out = ["## tcp: what the sampled TCP state, the tracepoints and --tcp-probe cost", ""]
out.append(f"`bench/tcp.sh {reps} {secs}`: loopback, {os.cpu_count()} CPUs ({model}), kernel "
           f"{platform.release()}, {pin}, release build. A 1-flow stream, 1 thread a side, "
           f"{reps} repetitions of {secs} s after 1 s of warm-up, the order of the cases "
           "rotating. `on` is every default probe: each end samples its flow's TCP_INFO every "
           f"100 ms ({statistics.median(samples(i) for i in on):.0f} samples a run, both ends) and "
           f"the tracepoints are {traced}; `off` runs with PLUMB_PROBES_OFF=tcp_series,tracepoints. "
           "Rate from lo's bytes over the window, cost from every CPU's busy time in /proc/stat "
           "over it. Medians with min-max; on/off is the geometric mean of the repetitions' "
           "ratios with its 95 % Student-t interval, a difference called only where it leaves 1 out.")
out.append("")
probe = [it("probe", r) for r in range(1, reps + 1)]

def table(base, case, names):
    out.append(f"| figure | {names[0]} | {names[1]} | {names[1]}/{names[0]} [95 % interval] | called |")
    out.append("|---|---|---|---|---|")
    for name, key, fmt in [("rate, Gbit/s", rate, "{:.2f}"), ("host busy CPU s per GB", busy_per_gb, "{:.3f}")]:
        a, b = [key(i) for i in base], [key(i) for i in case]
        cell = lambda v: f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"
        ri = ratio_interval(list(zip(a, b)))
        ratio = "-" if ri is None else f"{ri[0]:.3f} [{ri[1]:.3f}, {ri[2]:.3f}]"
        out.append(f"| {name} | {cell(a)} | {cell(b)} | {ratio} | {called(ri, 'more', 'less')} |")

table(off, on, ("off", "on"))
cost = [sum(i[e]["tcp_series"]["sampler_cpu_s"] for e in ("client", "server")) / i["client"]["window_s"]
        for i in on]
busy = [busy_s(i) / i["client"]["window_s"] for i in on]
share = statistics.median(c / b for c, b in zip(cost, busy))
out.append("")
out.append(f"The sampling threads' own CPU time, as each series records it (`sampler_cpu_s`, both "
           f"ends): {statistics.median(cost) * 1e3:.2f} ms per second of window (median), "
           f"{share * 100:.3f} % of the host's busy CPU time in the same windows: an upper bound, "
           "as what arrived while a reading held the socket's lock is processed on the reading "
           "thread as it lets go, work the sender's thread or a softirq does otherwise.")
out.append("")
acks = [sum(i[e].get("acks", {}).get("counted", 0) for e in ("client", "server")) / i["client"]["window_s"]
        for i in probe]
reader = [sum(i[e].get("acks", {}).get("sampler_cpu_s", 0.0) for e in ("client", "server"))
          / i["client"]["window_s"] for i in probe]
out.append(f"`--tcp-probe` (`probe`) reads every segment each end's flows received "
           f"(tcp:tcp_probe, {statistics.median(acks) / 1e3:.0f} k a second here, both ends), "
           "against every default probe (`on`):")
out.append("")
table(on, probe, ("on", "probe"))
out.append("")
out.append(f"The reading threads' own CPU time (`acks.sampler_cpu_s`, both ends): "
           f"{statistics.median(reader) * 1e3:.1f} ms per second of window (median); the rest of "
           "the cost is the kernel writing each record as the segment arrives.")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## tcp: " "$section"
