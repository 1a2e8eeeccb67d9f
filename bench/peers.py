"""The benchmark of record: every case against every peer that can run it,
in one alternating run, measured the same way for all (bench/peers.sh
documents it and sets the environment; this file runs and writes it).

Each run starts the tool's server (if it has one) and its client, waits
WARM seconds, then takes the window: the kernel's own counters (lo's bytes
and packets, /proc/net/snmp) and every CPU's idle and iowait time in
/proc/stat (the rest of the window's CPU-seconds is busy: see cpu_ticks)
at both edges, with the CPU time
of the tool's own processes (/proc/PID/stat, the client, the server and
their children) beside them. The tool runs WARM + SECS + 1 seconds, so
the window lies inside its steady state and its start and end are out.

Rate of record: stream, the bits lo carried; udp-stream, the datagrams
UDP delivered (Udp.InDatagrams); udp-rr, half of those; TCP rr and crr,
whose transactions no kernel counter tells apart, the tool's own count,
with the kernel's segments per transaction beside it to show that every
tool did the same work for one. Cost of record: the host's busy CPU
seconds per unit of work (everything the host spent: both ends, the
softirqs, anything else), with the tools' own processes' CPU beside it.
"""
import datetime
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from ratio import called, ratio_interval  # noqa: E402

PLUMB = os.path.abspath(os.environ["PLUMB"])
PEERS = os.path.abspath(os.environ["PEERS"])
WORK = os.environ["WORK"]
REPS = int(os.environ.get("REPS", "5"))
SECS = int(os.environ.get("SECS", "5"))
WARM = 1
RUN_S = WARM + SECS + 1
IPERF3 = os.environ.get("IPERF3", "iperf3")
# Another machine's run gets its own section beside the one of record.
HEADING = os.environ.get("HEADING", "peers")
# PIN="C,S": every tool's client on CPU C and its server on CPU S, so that
# where the scheduler happens to put the two ends is no part of the
# comparison (on many CPUs it moves a single stream's rate by a third).
PIN = os.environ.get("PIN")
UDP_SIZE = 1472
# IO=auto: plumb runs each case once, on the engine it picks without
# `--io` (the default a user gets), in place of each engine forced.
AUTO = os.environ.get("IO") == "auto"

port = 20000 + int.from_bytes(os.urandom(2), "little") % 10000


def next_port():
    """A fresh listening port below the ephemeral range for every server,
    so that no TIME_WAIT of an earlier run is in the way."""
    global port
    port += 3
    return port


# ---- the tools' commands, per case -------------------------------------

def plumb(workload, *args):
    if AUTO:
        args = [a for i, a in enumerate(args) if a != "--io" and (i == 0 or args[i - 1] != "--io")]

    def cmd(p):
        return None, [PLUMB, "run", workload, "--json", "--iterations", "1", "--no-store",
                      "--duration", f"{SECS + 1}s", "--warmup", f"{WARM}s", *args]
    return cmd


def iperf3(*args):
    def cmd(p):
        return ([IPERF3, "-s", "-1", "-p", str(p)],
                [IPERF3, "-c", "127.0.0.1", "-p", str(p), "-t", str(RUN_S), "-J", *args])
    return cmd


def netperf(test, *args):
    def cmd(p):
        return ([f"{PEERS}/netserver", "-D", "-p", str(p)],
                [f"{PEERS}/netperf", "-H", "127.0.0.1", "-p", str(p), "-l", str(RUN_S), "-t", test,
                 "-P", "0", "--", "-o", "THROUGHPUT,THROUGHPUT_UNITS", *args])
    return cmd


def neper(binary, *args):
    def cmd(p):
        data = p + 1 if isinstance(p, int) else f"{p}+1"
        common = ["-C", str(p), "-P", str(data), "--nolog", *args]
        return ([f"{PEERS}/{binary}", "-l", str(RUN_S + 3), *common],
                [f"{PEERS}/{binary}", "-c", "-H", "127.0.0.1", "-l", str(RUN_S), *common])
    return cmd


def sockperf(mode, *args):
    def cmd(p):
        return (["sockperf", "server", "-i", "127.0.0.1", "-p", str(p), *[a for a in args if a == "--tcp"]],
                ["sockperf", mode, "-i", "127.0.0.1", "-p", str(p), "-t", str(RUN_S), *args])
    return cmd


def qperf(test, *args):
    def cmd(p):
        return (["qperf", "--listen_port", str(p)],
                ["qperf", "127.0.0.1", "--listen_port", str(p), "-t", str(RUN_S), *args, test])
    return cmd


def many_rr(flows, note):
    """rr over many flows, 2 threads an end: plumb and neper alone."""
    return dict(
        desc=f"rr, {flows} TCP flows, 2 threads an end, 1 byte", unit="tx", note=note,
        tools={
            "plumb": plumb("rr", "--flows", str(flows), "--threads", "2", "--io", "epoll"),
            "plumb-uring": plumb("rr", "--flows", str(flows), "--threads", "2", "--io", "uring"),
            "neper": neper("tcp_rr", "-F", str(flows), "-T", "2", "-Q", "1", "-R", "1"),
        })


def one_crr(close, first, note, **peers):
    """crr over 1 flow closed by `first` with FIN. Who closes first decides
    which end waits for the other's FIN and keeps the TIME_WAIT, so each
    close order is its own case, with the peers that close that way."""
    return dict(
        desc=f"crr, 1 flow, a TCP connection per 1-byte transaction, the {first} closing first with FIN",
        unit="tx", note=note,
        tools={
            "plumb": plumb("crr", "--close", close, "--io", "epoll"),
            "plumb-uring": plumb("crr", "--close", close, "--io", "uring"),
            **peers,
        })


# plumb's two engines, each a tool of the cases it runs; under IO=auto
# one, named in the section by what the runs' records say ran.
ENGINES = (("plumb", "auto"),) if AUTO else (("plumb", "epoll"), ("plumb-uring", "uring"))


# What each case is, how its rate is counted, and each tool's command. The
# same flows and threads for every tool; where one cannot take an option,
# the note says so.
CASES = {
    "stream-1": dict(
        desc="stream, 1 flow, 128K writes, client sends",
        unit="bit",
        note="plumb and qperf read whole 128K messages (a short read is followed by one for the rest); "
             "on loopback a reader that empties the queue at every read reorders segments and costs the "
             "sender spurious retransmits.",
        tools={
            "plumb": plumb("stream", "--msg-size", "128K", "--io", "epoll"),
            "plumb-uring": plumb("stream", "--msg-size", "128K", "--io", "uring"),
            "iperf3": iperf3("-l", "128K"),
            "netperf": netperf("TCP_STREAM", "-m", "128K"),
            "neper": neper("tcp_stream", "-B", "131072"),
            "qperf": qperf("tcp_bw", "-m", "128K"),
        }),
    "stream-32": dict(
        desc="stream, 32 flows, 256 B writes, 8K buffers, nodelay, receive direction, 1 thread an end",
        unit="bit",
        note="neper has no socket-buffer option: it runs with autotuned buffers, another test, shown "
             "but not taken as the best peer.",
        unlike={"neper"},
        tools={
            "plumb": plumb("stream", "--flows", "32", "--threads", "1", "--msg-size", "256",
                           "--sndbuf", "8K", "--rcvbuf", "8K", "--nodelay", "--direction", "recv",
                           "--io", "epoll"),
            "plumb-uring": plumb("stream", "--flows", "32", "--threads", "1", "--msg-size", "256",
                                 "--sndbuf", "8K", "--rcvbuf", "8K", "--nodelay", "--direction", "recv",
                                 "--io", "uring"),
            "iperf3": iperf3("-R", "-P", "32", "-l", "256", "-w", "8K", "-N"),
            "neper": neper("tcp_stream", "-M", "-F", "32", "-T", "1", "-B", "256", "--no-delay"),
        }),
    "rr-1": dict(
        desc="rr, 1 TCP flow, 1-byte request and response",
        unit="tx",
        note="sockperf's smallest TCP message is 14 bytes.",
        tools={
            "plumb": plumb("rr", "--io", "epoll"),
            "plumb-uring": plumb("rr", "--io", "uring"),
            "netperf": netperf("TCP_RR", "-r", "1,1"),
            "neper": neper("tcp_rr", "-Q", "1", "-R", "1"),
            "sockperf": sockperf("ping-pong", "--tcp", "-m", "14", "--pps", "max"),
            "qperf": qperf("tcp_lat", "-m", "1"),
        }),
    "crr-1": one_crr("fin", "client", "neper's client closes first (with --time-wait, a FIN); netperf's "
                                      "server closes first, the next case.",
                     neper=neper("tcp_crr", "-Q", "1", "-R", "1", "--time-wait")),
    "crr-1-server-fin": one_crr("server-fin", "server", "netperf's TCP_CRR: its server closes right after the "
                                                        "response and the client once it has read the end.",
                                netperf=netperf("TCP_CRR", "-r", "1,1")),
    "rr-1000": many_rr(1000, "netperf, sockperf and qperf open one flow per process."),
    "rr-10000": many_rr(10000, ""),
    "udp-stream": dict(
        desc=f"udp-stream, 1 flow, {UDP_SIZE}-byte datagrams, as fast as the sender can",
        unit="dgram", note="",
        tools={
            "plumb": plumb("udp-stream", "--msg-size", str(UDP_SIZE), "--io", "epoll"),
            "iperf3": iperf3("-u", "-b", "0", "-l", str(UDP_SIZE)),
            "netperf": netperf("UDP_STREAM", "-m", str(UDP_SIZE)),
            "neper": neper("udp_stream", "-B", str(UDP_SIZE)),
            "qperf": qperf("udp_bw", "-m", str(UDP_SIZE)),
        }),
    "udp-rr": dict(
        desc="udp-rr, 1 flow, 16-byte request and response",
        unit="tx", note="",
        tools={
            "plumb": plumb("udp-rr", "--req-size", "16", "--resp-size", "16", "--io", "epoll"),
            "netperf": netperf("UDP_RR", "-r", "16,16"),
            "neper": neper("udp_rr", "-Q", "16", "-R", "16"),
            "sockperf": sockperf("ping-pong", "-m", "16", "--pps", "max"),
            "qperf": qperf("udp_lat", "-m", "16"),
        }),
}


if AUTO:
    for spec in CASES.values():
        spec["tools"].pop("plumb-uring", None)


def commands(case, tool, p):
    """The tool's server and client commands, pinned where PIN says: plumb
    by its own --client-cpus and --server-cpus, the peers by taskset."""
    server, client = CASES[case]["tools"][tool](p)
    if not PIN:
        return server, client
    c, s = PIN.split(",")
    if tool.startswith("plumb"):
        return server, client + ["--client-cpus", c, "--server-cpus", s]
    return server and ["taskset", "-c", s, *server], ["taskset", "-c", c, *client]


# ---- the kernel's counters and the processes' CPU -----------------------

def snmp():
    out, lines = {}, open("/proc/net/snmp").read().splitlines()
    for head, vals in zip(lines[::2], lines[1::2]):
        proto, keys = head.split(":")
        for k, v in zip(keys.split(), vals.split(":")[1].split()):
            out[f"{proto}.{k}"] = int(v)
    return out


def cpu_ticks():
    """(busy, idle, online CPUs) of /proc/stat. A tickless kernel counts
    the busy states by sampling at its tick, and a CPU that sleeps and
    wakes thousands of times a second loses ticks, busy ones among them
    (without IRQ time accounting); idle and iowait come from its idle
    clock, exact. So the busy time of record is the window's CPU-seconds
    less idle and iowait, and the busy ticks are kept beside it."""
    lines = open("/proc/stat").read().splitlines()
    f = [int(x) for x in lines[0].split()[1:]]
    # user nice system idle iowait irq softirq steal
    cpus = sum(1 for ln in lines[1:] if ln.startswith("cpu"))
    return f[0] + f[1] + f[2] + f[5] + f[6] + f[7], f[3] + f[4], cpus


def tree_cpu_ticks(roots):
    """utime + stime of every process under the given pids (all threads,
    living or ended, of each)."""
    parent, ticks = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        parent[int(d)] = int(rest[1])
        ticks[int(d)] = int(rest[11]) + int(rest[12])
    keep, todo = set(), [r for r in roots if r in ticks]
    while todo:
        p = todo.pop()
        keep.add(p)
        todo.extend(c for c, pp in parent.items() if pp == p and c not in keep)
    return sum(ticks[p] for p in keep)


def snapshot(pids):
    lo = "/sys/class/net/lo/statistics/"
    t = time.monotonic()
    busy, idle, cpus = cpu_ticks()
    return dict(t=t, busy=busy, idle=idle, cpus=cpus, procs=tree_cpu_ticks(pids),
                lo_bytes=int(open(lo + "rx_bytes").read()),
                lo_packets=int(open(lo + "rx_packets").read()), snmp=snmp())


def lo_packets():
    return int(open("/sys/class/net/lo/statistics/rx_packets").read())


def traffic_starts():
    """When the tool's traffic started: some tools (sockperf) spend seconds
    on their own warm-up first, and the window must not take that in. The
    first 50 ms with more than 50 packets on lo, or after 10 s."""
    until, last = time.monotonic() + 10, lo_packets()
    while time.monotonic() < until:
        time.sleep(0.05)
        now = lo_packets()
        if now - last > 50:
            return time.monotonic()
        last = now
    return time.monotonic()


def one_run(case, tool, rep):
    server, client = commands(case, tool, next_port())
    base = f"{WORK}/{case}-{tool}-{rep}"
    srv = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=WORK) if server else None
    if srv:
        time.sleep(0.5)
    cl = subprocess.Popen(client, stdout=open(base + ".out", "w"), stderr=open(base + ".err", "w"), cwd=WORK)
    pids = [p.pid for p in (srv, cl) if p]
    start = traffic_starts()
    time.sleep(max(0.0, start + WARM - time.monotonic()))
    a = snapshot(pids)
    time.sleep(max(0.0, start + WARM + SECS - time.monotonic()))
    b = snapshot(pids)
    try:
        rc = cl.wait(timeout=RUN_S + 60)
    except subprocess.TimeoutExpired:
        cl.kill()
        rc = cl.wait()
    if srv:
        try:
            srv.wait(timeout=0.5 if tool != "neper" else 5)
        except subprocess.TimeoutExpired:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(timeout=5)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
    hz = os.sysconf("SC_CLK_TCK")
    return dict(case=case, tool=tool, rep=rep, rc=rc, window_s=b["t"] - a["t"],
                busy_s=(b["t"] - a["t"]) * b["cpus"] - (b["idle"] - a["idle"]) / hz,
                ticked_s=(b["busy"] - a["busy"]) / hz, procs_s=(b["procs"] - a["procs"]) / hz,
                lo_bytes=b["lo_bytes"] - a["lo_bytes"], lo_packets=b["lo_packets"] - a["lo_packets"],
                snmp={k: b["snmp"][k] - a["snmp"].get(k, 0) for k in b["snmp"]},
                own=own_rate(case, tool, base), engine=engine_ran(tool, base))


def engine_ran(tool, base):
    """The engine plumb's record says it ran (`io`, absent for epoll), and
    `+auto` where the rule chose it."""
    if not tool.startswith("plumb"):
        return None
    try:
        spec = json.loads(open(base + ".out").read())["spec"]
    except (OSError, ValueError, KeyError):
        return None
    return spec.get("io", "epoll") + ("+auto" if spec.get("io_auto") else "")


# ---- each tool's own report, in the case's unit per second ---------------

def number(pattern, text, group=1):
    m = re.search(pattern, text, re.M)
    return float(m.group(group)) if m else None


SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def own_rate(case, tool, base):
    try:
        text = open(base + ".out").read()
        unit = CASES[case]["unit"]
        if tool.startswith("plumb"):
            it = json.loads(text)["iterations"][0]
            d = it["derived"]
            return d["throughput_bps"] if unit == "bit" else d["pps"] if unit == "dgram" else d["tps"]
        if tool == "iperf3":
            end = json.loads(text)["end"]
            if unit == "dgram":
                s = end["sum"]
                return (s["packets"] - s["lost_packets"]) / s["seconds"]
            return end["sum_received"]["bits_per_second"]
        if tool == "netperf":
            v = number(r"^([\d.]+),", text)
            if v is None:
                return None
            # UDP_STREAM's THROUGHPUT is what the sender sent, not what
            # arrived: no own figure of delivered datagrams.
            return v * 1e6 if unit == "bit" else None if unit == "dgram" else v
        if tool == "neper":
            kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            if unit == "tx":
                return float(kv["throughput"])
            # The client's count of what crossed, whichever way it went.
            bps = max(float(kv["local_throughput"]), float(kv["remote_throughput"]))
            return bps if unit == "bit" else None
        if tool == "sockperf":
            run = number(r"RunTime=([\d.]+)", text)
            got = number(r"ReceivedMessages=(\d+)", text)
            return got / run if run and got else None
        if tool == "qperf":
            if unit == "tx":
                m = re.search(r"latency\s*=\s*([\d.]+)\s*(n|u|m)?s", text)
                if not m:
                    return None
                half = float(m.group(1)) * {"n": 1e-9, "u": 1e-6, "m": 1e-3, None: 1}[m.group(2)]
                return 1 / (2 * half)
            key = "bw" if unit == "bit" else "recv_bw"
            m = re.search(rf"\b{key}\s*=\s*([\d.]+)\s*([KMGT]?)B/sec", text)
            if not m:
                return None
            bytes_s = float(m.group(1)) * SCALE[m.group(2)]
            return bytes_s * 8 if unit == "bit" else bytes_s / UDP_SIZE
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
        return None
    return None


# ---- rate and work of record ---------------------------------------------

def kernel_rate(run):
    """The rate of record, from the kernel's counters where they tell the
    work apart, in the case's unit per second."""
    unit, w, s = CASES[run["case"]]["unit"], run["window_s"], run["snmp"]
    if unit == "bit":
        return run["lo_bytes"] * 8 / w
    if unit == "dgram":
        return s["Udp.InDatagrams"] / w
    if run["case"].startswith("udp"):
        return s["Udp.InDatagrams"] / 2 / w
    return run["own"]


def work_per_busy_s(run):
    r = kernel_rate(run)
    return r * run["window_s"] / run["busy_s"] if r and run["busy_s"] > 0 else None


def work_per_proc_s(run):
    r = kernel_rate(run)
    return r * run["window_s"] / run["procs_s"] if r and run["procs_s"] > 0 else None


def segs_per_tx(run):
    r = kernel_rate(run)
    return run["snmp"]["Tcp.OutSegs"] / (r * run["window_s"]) if r else None


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "bit":
        return f"{v / 1e9:.2f} Gbit/s"
    scale = next(((d, s) for d, s in ((1e6, "M"), (1e3, "k")) if v >= d), (1, ""))
    return f"{v / scale[0]:.3g} {scale[1]}{dict(tx='tx', dgram='dgram')[unit]}/s"


def per_cpu_fmt(v, unit):
    if v is None:
        return "n/a"
    return f"{v / 1e9:.2f} Gbit" if unit == "bit" else f"{v / 1e3:.1f} k{dict(tx='tx', dgram='dgram')[unit]}"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    cases = sys.argv[1:] or list(CASES)
    for c in cases:
        if c not in CASES:
            sys.exit(f"bench/peers.sh: no case {c!r}; the cases are {', '.join(CASES)}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    raw = os.environ.get("RAW") or f"{WORK}/runs.jsonl"
    if not os.environ.get("RENDER_ONLY") and os.path.exists(raw):
        # Appended to, it would mix an earlier run's repetitions into this one's pairs.
        sys.exit(f"bench/peers.sh: RAW={raw} exists; give a new file, or RENDER_ONLY=1 to render it")
    runs = []
    if os.environ.get("RENDER_ONLY"):
        runs = [json.loads(line) for line in open(raw)]
    else:
        # Kept with every run, so that a section rendered again names the
        # build that measured it.
        plumb = plumb_version()
        with open(raw, "w") as out:
            for rep in range(1, REPS + 1):
                for c in cases:
                    tools = list(CASES[c]["tools"])
                    k = (rep - 1) % len(tools)
                    for tool in tools[k:] + tools[:k]:
                        print(f"repetition {rep}/{REPS}: {c} {tool}", file=sys.stderr)
                        r = one_run(c, tool, rep)
                        r["plumb"] = plumb
                        runs.append(r)
                        out.write(json.dumps(r) + "\n")
                        out.flush()
    render(runs, cases)


def plumb_version():
    return subprocess.run([PLUMB, "--version"], capture_output=True, text=True).stdout.strip()


def shown(cmd):
    """A command with its programs by name: where they lie here says nothing of the run."""
    return " ".join(os.path.basename(a) if os.path.isabs(a) else a for a in cmd)


def ticked_note(runs):
    """How much of the busy time of record the busy ticks saw."""
    shares = sorted(x for x in map(ticked_share, runs) if x)
    if not shares:
        return ""
    return (" Busy time is the window's CPU-seconds less the idle and iowait time of /proc/stat, which a "
            "tickless kernel keeps from its idle clock; its busy states, sampled at the tick, saw "
            f"{100 * med(shares):.0f} % of that (median; the lowest {100 * shares[0]:.0f} %), for they miss "
            "ticks on CPUs that sleep and wake often (each tool's share is in its case's table).")


def pct(x):
    return f"{100 * x:.0f} %" if x else "-"


def ticked_share(run):
    """The share of one run's busy time that the busy ticks saw."""
    t = run.get("ticked_s")
    return t / run["busy_s"] if t and run["busy_s"] > 0 else None


def render(runs, cases):
    versions = {
        "plumb": next((r["plumb"] for r in runs if "plumb" in r), None) or plumb_version(),
        "iperf3": subprocess.run([IPERF3, "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        "netperf": subprocess.run([f"{PEERS}/netperf", "-V"], capture_output=True, text=True).stdout.strip(),
        "sockperf": subprocess.run(["sockperf", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        "qperf": subprocess.run(["qperf", "--version"], capture_output=True, text=True, ).stderr.strip()
        or "qperf",
    }
    cpu_model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    reps = max(r["rep"] for r in runs)
    which = "every case" if cases == list(CASES) else ", ".join(cases)
    out = [f"## {HEADING}: plumb against every peer, {which}\n"]
    cc = os.environ.get("TCP_CC")
    env = (f"HEADING='{HEADING}' " if HEADING != "peers" else "") + (f"PIN={PIN} " if PIN else "") \
        + ("IO=auto " if AUTO else "") \
        + (f"TCP_CC={cc} " if cc else "")
    cc_now = open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
    cc_note = (f"Every tool's TCP runs under {cc_now}, set as the host's default for the run. " if cc
               else f"Every tool's TCP runs under the host's default congestion control, {cc_now}. ")
    pinned = (f"Every tool's client runs on CPU {PIN.split(',')[0]} and its server on CPU {PIN.split(',')[1]} "
              "(plumb's `--client-cpus` and `--server-cpus`, taskset for the peers). ") if PIN else ""
    only = "" if cases == list(CASES) else " " + " ".join(cases)
    out.append(
        f"`{env}bash bench/peers.sh {reps} {SECS}{only}` on {datetime.date.today().isoformat()}: {os.cpu_count()} CPUs "
        f"({cpu_model}), kernel {platform.release()}; {versions['plumb']}; {versions['iperf3']}; "
        f"{versions['netperf']}; neper 1.1.0; {versions['sockperf']}; qperf 0.4.11. "
        f"{reps} repetitions; in each, every case runs every tool that can run it, one after the other, "
        f"the order of the tools rotating with the repetition. {pinned}{cc_note}Each tool runs {RUN_S} s of traffic and the "
        f"window is {SECS} s from {WARM} s after its traffic started (the first 50 ms with more than 50 "
        "packets on lo: sockperf warms up on its own for about 2 s first). Rate of record: the bits lo carried "
        "(stream; headers and ACKs included, a quarter of them with 256-byte writes, so the own reports "
        "stand beside them), the datagrams UDP delivered (`Udp.InDatagrams`; udp-rr half of them), the tool's own "
        "transactions for TCP rr and crr (the kernel's `Tcp.OutSegs` per transaction beside them shows "
        "each tool did the same work for one). Cost of record: work per busy CPU-second of the whole host "
        "(all CPUs' time less their idle and iowait, below), with the tool's own "
        "processes (client, server and their children, /proc/PID/stat) beside it. plumb/best is the "
        "geometric mean of the repetitions' ratios of plumb to the peer with the best median, with its "
        "95 % Student-t interval; a difference is called only where the interval leaves 1 out. "
        + ("plumb runs every case without `--io`, on the engine `--io auto` picks (the default), "
           "named in the engine column as its records state it. " if AUTO else
           "plumb runs each TCP case on both engines, epoll (`plumb`) and io_uring (`plumb-uring`, "
           "`--io uring`), each set against the best peer. ") +
        "The goal: a median of at least 1.05 with the interval's lower end at least 0.97, in rate and "
        "per busy CPU-second; at 1000 flows and more, per busy CPU-second, a median of at least 1.2 and a "
        "lower end of at least 1.1." + ticked_note(runs) + "\n")
    summary = ["| case | engine | rate: best peer | plumb/best [95 %] | called | per busy CPU-s: best peer | "
               "plumb/best [95 %] | called |", "|---|---|---|---|---|---|---|---|"]
    engines = ["| case | rate, uring/epoll [95 %] | called | per busy CPU-s, uring/epoll [95 %] | called |",
               "|---|---|---|---|---|"]
    detail = []

    def paired(fig, a_runs, b_runs):
        """The (a, b) figures of the repetitions both ran."""
        pairs = []
        for r in b_runs:
            a = next((p for p in a_runs if p["rep"] == r["rep"]), None)
            if a and fig(a) and fig(r):
                pairs.append((fig(a), fig(r)))
        return ratio_interval(pairs)

    def cell(iv, above, below):
        return [f"{iv[0]:.3f} [{iv[1]:.3f}, {iv[2]:.3f}]" if iv else "n/a", called(iv, above, below)]

    for c in cases:
        spec, unit = CASES[c], CASES[c]["unit"]
        by_tool = {t: [r for r in runs if r["case"] == c and r["tool"] == t and r["rc"] == 0]
                   for t in spec["tools"]}
        for tool, engine in ENGINES:
            if tool not in by_tool:
                continue
            cells = []
            for fig in (kernel_rate, work_per_busy_s):
                meds = {t: med([fig(r) for r in rs]) for t, rs in by_tool.items()
                        if not t.startswith("plumb") and t not in spec.get("unlike", ())}
                meds = {t: m for t, m in meds.items() if m}
                if not meds or not by_tool[tool]:
                    cells += ["n/a", "n/a", "n/a"]
                    continue
                best = max(meds, key=meds.get)
                cells += [best] + cell(paired(fig, by_tool[best], by_tool[tool]), "better", "worse")
            if AUTO:
                ran = sorted({r.get("engine") or "?" for r in by_tool[tool]})
                engine = "auto: " + ", ".join(e.removesuffix("+auto") for e in ran)
            summary.append(f"| {c} | {engine} | " + " | ".join(cells) + " |")
        if "plumb-uring" in by_tool:
            cells = []
            for fig in (kernel_rate, work_per_busy_s):
                cells += cell(paired(fig, by_tool["plumb"], by_tool["plumb-uring"]), "uring better", "uring worse")
            engines.append(f"| {c} | " + " | ".join(cells) + " |")
        detail.append(f"### {c}: {spec['desc']}\n")
        detail.append("| tool | rate (kernel) | rate (own report) | per busy CPU-s of the host | "
                      "per CPU-s of its processes | TCP segments per unit | busy seen by ticks | runs |")
        detail.append("|---|---|---|---|---|---|---|---|")
        for t, rs in by_tool.items():
            segs = med([segs_per_tx(r) for r in rs]) if unit == "tx" and not c.startswith("udp") else None
            failed = sum(1 for r in runs if r["case"] == c and r["tool"] == t and r["rc"] != 0)
            detail.append(
                f"| {t} | {fmt(med([kernel_rate(r) for r in rs]), unit)} | {fmt(med([r['own'] for r in rs]), unit)}"
                f" | {per_cpu_fmt(med([work_per_busy_s(r) for r in rs]), unit)}"
                f" | {per_cpu_fmt(med([work_per_proc_s(r) for r in rs]), unit)}"
                f" | {f'{segs:.2f}' if segs else '-'} | {pct(med([ticked_share(r) for r in rs]))} | {len(rs)}{f' ({failed} failed)' if failed else ''} |")
        if spec["note"]:
            detail.append(f"\n{spec['note']}")
        detail.append("\nCommands (PORT a fresh port per run):\n")
        for t in spec["tools"]:
            server, client = commands(c, t, "PORT")
            if server:
                detail.append(f"    {shown(server)} &")
            detail.append("    " + shown(client))
        detail.append("")
    out += summary + [""]
    if len(engines) > 2:
        out += ["The two engines against each other, paired by repetition:", ""] + engines + [""]
    out += detail
    open(f"{WORK}/section.md", "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
