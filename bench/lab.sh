#!/usr/bin/env bash
# The lab's queue on one PostgreSQL: AGENTS clients, each claiming an empty
# job with plumb_lab_claim and finishing it with plumb_lab_done, the two
# calls `plumb agent` makes for each job (docs/lab.md), for SECS seconds;
# and one client alone, for the claim's time without contention. pgbench
# drives them, REPS times each, alternating. Writes the "lab queue" section
# of BENCHMARKS.md.
#
#   bench/lab.sh [AGENTS] [SECS] [REPS]      (defaults: 50 agents, 20 s, 3 repetitions)
. "$(dirname "$0")/lib.sh"
AGENTS=${1:-50}
SECS=${2:-20}
REPS=${3:-3}
bench_need pgbench=postgresql-client
bench_local
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
mkdir "$work/pg"
if [[ $(id -u) == 0 ]]; then chmod 755 "$work" && chown postgres: "$work/pg"; fi
as_pg "$pgbin/initdb" -D "$work/pg/data" -U plumb -A trust -E UTF8 >/dev/null
# The server's defaults otherwise: fsync and synchronous commit on, as a
# lab's database would have them.
as_pg "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w start \
  -o "-k $work/pg -p $port -c listen_addresses=127.0.0.1 -c max_connections=$((AGENTS + 20))" >/dev/null
trap 'as_pg "$pgbin/pg_ctl" -D "$work/pg/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
sql() { psql -q -X -h 127.0.0.1 -p "$port" -U plumb -d "$1" -v ON_ERROR_STOP=1 -c "$2"; }
sql postgres "CREATE DATABASE lab"
db="postgres://plumb@127.0.0.1:$port/lab?sslmode=disable"
# The lab's tables and functions, made as plumb makes them.
"$PLUMB" lab grant plumb --db "$db" >/dev/null 2>&1

# One job claimed and finished per transaction of pgbench's, each client
# an agent with its own name and a token new at every claim.
cat >"$work/claim.sql" <<'SQL'
\set n random(1, 1000000000)
SELECT r_job AS job FROM plumb_lab_claim('agent-' || :client_id, 'bench', 30, :client_id || '-' || :n) \gset
SELECT plumb_lab_done(:job, :client_id || '-' || :n, '{}');
SQL

rows=$(mktemp)
for rep in $(seq 1 "$REPS"); do
  for clients in 1 "$AGENTS"; do
    # A fresh queue, deep enough that no client finds it empty.
    sql lab "TRUNCATE lab_jobs, lab_sets RESTART IDENTITY;
      INSERT INTO lab_sets (experiment, label, class, file, quick, seed, submitted_by)
        VALUES ('bench', 'bench', 'bench', '', false, 1, 'bench');
      INSERT INTO lab_jobs (set_id, points, state, max_attempts)
        SELECT 1, 'empty', 'queued', 1 FROM generate_series(1, 400000);"
    sql lab "VACUUM ANALYZE lab_jobs"
    rm -f "$work"/log.*
    out=$(cd "$work" && pgbench -h 127.0.0.1 -p "$port" -U plumb -n -c "$clients" -j 2 -T "$SECS" \
      -r -l --log-prefix=log -f claim.sql lab 2>&1)
    python3 - "$clients" "$work" "$out" >>"$rows" <<'PY'
import glob, re, statistics, sys
clients, work, out = sys.argv[1], sys.argv[2], sys.argv[3]
tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out).group(1))
failed = re.search(r"number of failed transactions: (\d+)", out)
# pgbench -r: each statement's mean latency in ms, in the script's order.
lat = [float(m) for m in re.findall(r"^\s+([0-9.]+)\s+\d+\s+SELECT", out, re.M)]
if not lat:
    lat = [float(m) for m in re.findall(r"^\s+([0-9.]+)\s+SELECT", out, re.M)]
us = []
for f in glob.glob(f"{work}/log.*"):
    for line in open(f):
        us.append(int(line.split()[2]))
us.sort()
p = lambda q: us[min(len(us) - 1, int(q * len(us)))] / 1000
print(f"{clients} {tps:.0f} {lat[0]:.3f} {lat[1]:.3f} {p(0.5):.3f} {p(0.99):.3f} {failed.group(1) if failed else 0}")
PY
  done
done

section=$(mktemp)
{
  echo "## lab queue: jobs claimed and finished on one PostgreSQL"
  echo
  echo "\`bench/lab.sh $AGENTS $SECS $REPS\`: pgbench clients, each an agent claiming an empty job with"
  echo "\`plumb_lab_claim\` and finishing it with \`plumb_lab_done\` (the calls \`plumb agent\` makes per"
  echo "job, without the runs a job stores), $SECS s a repetition, 1 client and $AGENTS alternating,"
  echo "$REPS repetitions, a queue of 400 000 jobs; PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}')"
  echo "with its defaults (fsync and synchronous commit on) on the same host as the clients,"
  echo "kernel $(uname -r), $(nproc) CPUs. Medians over the repetitions (min-max); the latencies are"
  echo "pgbench's, in ms: each call's mean, and the whole claim-and-finish's median and 99th percentile."
  echo
  echo "| agents | jobs/s | claim, mean ms | finish, mean ms | both, median ms | both, p99 ms | failed |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  python3 - "$rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(int(f[0]), []).append([float(x) for x in f[1:]])
for clients in sorted(rows):
    cols = list(zip(*rows[clients]))
    cell = lambda c, fmt: f"{fmt(statistics.median(c))} ({fmt(min(c))}-{fmt(max(c))})"
    print(f"| {clients} | {cell(cols[0], lambda v: f'{v:.0f}')} | "
          + " | ".join(cell(c, lambda v: f'{v:.2f}') for c in cols[1:5])
          + f" | {int(sum(cols[5]))} |")
PY
} >"$section"
write_section "$OUT" "## lab queue:" "$section"
cat "$section"
