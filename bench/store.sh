#!/usr/bin/env bash
# The result store at team scale: 10 000 stored runs (made by importing
# copies of one real run, each with its own id, label, time and figures),
# then the time of `plumb list`, `plumb show`, `plumb compare` of two
# labels and `plumb history` of one point. Writes the "store" section of
# BENCHMARKS.md.
#
#   bench/store.sh [RUNS] [REPS]      (defaults: 10000 runs, 7 repetitions)
#
# DBS="sqlite postgres://..." picks the stores (default: a SQLite file).
. "$(dirname "$0")/lib.sh"
RUNS=${1:-10000}
REPS=${2:-7}
PEERS=${PEERS:-none} # no peer keeps results
bench_setup

# One real run, short, to copy.
"$PLUMB" run stream --duration 1s --warmup 0 --iterations 3 --label seed \
  --db "$work/seed.db" >/dev/null 2>&1
"$PLUMB" export --db "$work/seed.db" -o "$work/seed.json"

# 40 labels (nightly kernels) of 250 runs: 50 test points (spec keys kept
# from the seed run, tagged by the point in the label) times 5 runs each.
python3 - "$work/seed.json" "$RUNS" >"$work/many.json" <<'PY'
import copy, json, random, sys, uuid, datetime
seed = json.load(open(sys.argv[1]))["runs"][0]
runs, out = int(sys.argv[2]), []
rng = random.Random(1)
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
for i in range(runs):
    r = copy.deepcopy(seed)
    rec = r["record"]
    rec["uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    rec["label"] = f"6.{i * 40 // runs:02d}"
    rec["started_at"] = (t0 + datetime.timedelta(minutes=i)).isoformat().replace("+00:00", "Z")
    # 50 test points: the key is what tells them apart in the store.
    rec["spec_key"] = f"{i % 50:016x}"
    scale = rng.uniform(0.9, 1.1)
    for it in rec["iterations"]:
        it["derived"]["throughput_bps"] *= scale
    out.append(r)
json.dump({"schema": "plumb.export/1", "runs": out}, sys.stdout)
PY

median() { # COMMAND...: median wall seconds of REPS runs
  python3 - "$REPS" "$@" <<'PY'
import statistics, subprocess, sys, time
reps, cmd = int(sys.argv[1]), sys.argv[2:]
ts = []
for _ in range(reps):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ts.append(time.perf_counter() - t)
print(f"{statistics.median(ts):.3f} ({min(ts):.3f}-{max(ts):.3f})")
PY
}

rows=$(mktemp)
for db in ${DBS:-sqlite}; do
  if [[ $db == sqlite ]]; then
    loc="$work/many.db"
    name="SQLite file"
  else
    loc=$db
    name="PostgreSQL"
  fi
  t_import=$(REPS=1 median "$PLUMB" import --db "$loc" "$work/many.json" | cut -d' ' -f1)
  id=$("$PLUMB" list --db "$loc" --limit 1 --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run"])')
  {
    echo "| $name | \`plumb import\` of $RUNS runs into a new database | $t_import (once) |"
    echo "| $name | \`plumb list\` (all $RUNS) | $(median "$PLUMB" list --db "$loc") |"
    echo "| $name | \`plumb show RUN\` | $(median "$PLUMB" show "$id" --db "$loc") |"
    echo "| $name | \`plumb compare 6.00 6.39\` (250 runs a side, 50 points) | $(median "$PLUMB" compare 6.00 6.39 --db "$loc") |"
    echo "| $name | \`plumb history --spec-key 0000000000000007\` (200 runs) | $(median "$PLUMB" history --spec-key 0000000000000007 --db "$loc") |"
  } >>"$rows"
done

section=$(mktemp)
{
  echo "## store: the result database with $RUNS runs"
  echo
  echo "\`bench/store.sh $RUNS $REPS\`: $RUNS runs imported into a new database (copies of one real 3-iteration"
  echo "stream run, each with its own id, label, start time and figures: 40 labels of 250 runs, 50 test points),"
  echo "kernel $(uname -r), $(nproc) CPUs, release build; medians of $REPS timings of the whole command in"
  echo "seconds (min-max). Target: each under 1 s."
  echo
  echo "| store | command | seconds |"
  echo "|---|---|---|"
  cat "$rows"
} >"$section"
write_section "$OUT" "## store:" "$section"
