#!/usr/bin/env bash
# Kernels in a VM (--kernel): how long a guest takes to its first measured
# byte, per kernel, and what the VM does to the figures against the host
# running the same spec, alternating host and guest with each repetition.
#
#   bench/vm.sh [REPS [SECS]]
#
# KERNELS=DIR holds the linux-image .deb packages (default
# /var/cache/plumb-test-kernels, which tests/setup.sh fills); the newest
# 6.1 and 6.12 are used. ACCEL=tcg|kvm|auto picks the accelerator (default
# tcg). PLUMB=path/to/plumb uses a binary built elsewhere. Writes the
# "## Kernels in a VM" section of $OUT (BENCHMARKS.md).
. "$(dirname "$0")/lib.sh"
REPS=${1:-3}
SECS=${2:-5}
KERNELS=${KERNELS:-/var/cache/plumb-test-kernels}
ACCEL=${ACCEL:-tcg}
bench_need qemu-system-x86_64=qemu-system-x86
# No peer takes part: none is built.
PEERS=${PEERS:-none}
bench_setup
newest() { ls "$KERNELS"/linux-image-"$1"*-cloud-amd64_*.deb 2>/dev/null | sort -V | tail -n 1; }
K61=$(newest 6.1.0-)
K612=$(newest 6.12.)
[[ -n $K61 && -n $K612 ]] || { echo "bench/vm.sh: no 6.1 and 6.12 packages in $KERNELS (run tests/setup.sh as root)" >&2; exit 2; }

# 1. From the command to the first measured byte: a 1 s window without a
# warm-up, timed whole; the record's boot_s is QEMU's start to plumb's
# first word inside the guest.
for rep in $(seq 1 "$REPS"); do
  for k in "$K61" "$K612"; do
    name=$(basename "$k" .deb)
    t0=$(date +%s.%N)
    "$PLUMB" run stream --kernel "$k" --accel "$ACCEL" --duration 1s --warmup 0 --iterations 1 \
      --no-store --json >"$work/boot-$name-$rep.json" 2>"$work/boot-$name-$rep.err" || true
    t1=$(date +%s.%N)
    echo "$t0 $t1" >"$work/boot-$name-$rep.time"
  done
done

# 2. Host against guest, the same spec, alternating which goes first.
CASES=(
  "stream|stream --msg-size 128K"
  "rr|rr"
)
for rep in $(seq 1 "$REPS"); do
  if (( rep % 2 )); then order=(host vm); else order=(vm host); fi
  for c in "${CASES[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    for where in "${order[@]}"; do
      extra=()
      [[ $where == vm ]] && extra=(--kernel "$K612" --accel "$ACCEL")
      "$PLUMB" run "${args[@]}" "${extra[@]}" --json --iterations 1 --no-store \
        --duration "${SECS}s" --warmup 1s >"$work/$where-$name-$rep.json" 2>"$work/$where-$name-$rep.err" || true
    done
  done
done

section=$work/section.md
python3 - "$work" "$REPS" "$SECS" "$ACCEL" "$("$PLUMB" --version)" "$K61" "$K612" >"$section" <<'PY'
import json, math, os, platform, statistics, sys
work, reps, secs, accel, version, k61, k612 = sys.argv[1:8]
reps = int(reps)
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]

def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None

def interval(ratios):
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 2:
        return None
    m = statistics.mean(logs)
    half = T95[min(len(logs) - 2, len(T95) - 1)] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)

cpus = os.cpu_count()
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
out = ["## Kernels in a VM: boot time and what the guest does to the figures", ""]
out.append(f"Run by `bench/vm.sh {reps} {secs}` (ACCEL={accel}) with `{version}` on {cpus} CPUs "
           f"({model}), host kernel {platform.release()}; guests of 2 vCPUs and 1024 MiB, both "
           "ends inside the guest, against both ends on the host's loopback.")
out.append("")
out.append("From the command to the first measured byte: `plumb run stream --kernel PKG "
           "--duration 1s --warmup 0 --iterations 1`, timed whole (unpacking the package, "
           "writing the initramfs, booting, loading modules, setting up, the 1 s window, the "
           "record's trip back and the power-off), and `boot_s`, QEMU's start to plumb's first "
           f"word inside the guest. Medians of {reps}, min-max in brackets.")
out.append("")
out.append("| kernel | command, whole | of which the window | boot_s |")
out.append("|---|---|---|---|")
for k in (k61, k612):
    name = os.path.basename(k)[:-4]
    walls, boots = [], []
    for rep in range(1, reps + 1):
        r = load(os.path.join(work, f"boot-{name}-{rep}.json"))
        t0, t1 = map(float, open(os.path.join(work, f"boot-{name}-{rep}.time")).read().split())
        if r:
            walls.append(t1 - t0)
            boots.append(r["vm"]["boot_s"])
    if not walls:
        out.append(f"| {name} | failed | | |")
        continue
    cell = lambda v: f"{statistics.median(v):.1f} s [{min(v):.1f}-{max(v):.1f}]"
    out.append(f"| {name} | {cell(walls)} | 1.0 s | {cell(boots)} |")
out.append("")
out.append(f"The same spec on the host and in a guest of {os.path.basename(k612)[:-4]}, "
           f"{reps} repetitions of {secs} s after 1 s of warm-up, host and guest alternating "
           "which goes first. VM/host is the geometric mean of the repetitions' ratios with its "
           "95 % Student-t interval.")
out.append("")
out.append("| case | figure | host | VM | VM/host [95 % interval] |")
out.append("|---|---|---|---|---|")
figures = {
    "stream": [("rate, Gbit/s", lambda r: r["iterations"][0]["derived"]["throughput_bps"] / 1e9),
               ("host CPU s per GB", lambda r: r["iterations"][0]["derived"]["host_cpu_s_per_gb"])],
    "rr": [("transactions/s", lambda r: r["iterations"][0]["derived"]["tps"]),
           ("p50 latency, us", lambda r: r["iterations"][0]["client"]["latency"]["p50_us"])],
}
for case, figs in figures.items():
    for label, get in figs:
        host, vm, ratios = [], [], []
        for rep in range(1, reps + 1):
            h = load(os.path.join(work, f"host-{case}-{rep}.json"))
            v = load(os.path.join(work, f"vm-{case}-{rep}.json"))
            try:
                hv, vv = get(h), get(v)
            except Exception:
                continue
            host.append(hv); vm.append(vv); ratios.append(vv / hv)
        if not ratios:
            out.append(f"| {case} | {label} | failed | failed | - |")
            continue
        fmt = lambda x: f"{x:,.3g}"
        ri = interval(ratios)
        cell = "too few repetitions" if ri is None else f"{ri[0]:.3g} [{ri[1]:.3g}, {ri[2]:.3g}]"
        out.append(f"| {case} | {label} | {fmt(statistics.median(host))} | "
                   f"{fmt(statistics.median(vm))} | {cell} |")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## Kernels in a VM" "$section"
