# Sourced first by the bench/*.sh scripts: it moves to the repository root,
# and holds the setup they share and the writing of their section of
# BENCHMARKS.md, kept here so that a fix to either reaches every benchmark
# at once.
#
# The scripts' environment, as each documents it: PLUMB=path/to/plumb uses a
# binary built elsewhere, PEERS=DIR a directory holding netperf and neper,
# OUT=FILE another file than BENCHMARKS.md.
# Every benchmark stops at its first failure, as each used to say itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-BENCHMARKS.md}

# bench_need CMD[=PKG]...: the peers come from Debian where it has them, so
# a fresh machine needs nothing but this script. PKG names the package where
# it differs from the command (IPERF3 may name another binary). As the
# scripts always did, a failed apt-get update is passed over and a failed
# install ends the run.
bench_need() {
  local a pkgs=()
  for a; do
    command -v "${a%%=*}" >/dev/null || pkgs+=("${a#*=}")
  done
  if (( ${#pkgs[@]} )) && apt-get update -qq; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
  fi
}

# bench_plumb: sets PLUMB, built only when not given, so that a machine
# without a toolchain can run a binary from elsewhere.
bench_plumb() {
  if [[ -z ${PLUMB:-} ]]; then
    cargo build --release -q
    PLUMB=target/release/plumb
  fi
}

# bench_local: sets PLUMB (bench_plumb) and work, a scratch directory the
# EXIT trap removes: for the scripts that run plumb alone.
bench_local() {
  bench_plumb
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

# bench_record NAME WORKLOAD ARGS...: one unstored iteration of plumb run
# WORKLOAD ARGS, $SECS s after 1 s of warm-up, its record in
# $work/NAME-$rep.json (empty where the run failed; why in NAME-$rep.err).
bench_record() {
  local name=$1
  shift
  "$PLUMB" run "$@" --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s \
    >"$work/$name-$rep.json" 2>"$work/$name-$rep.err" || true
}

# bench_setup: sets PLUMB (bench_plumb), PEERS, work (a scratch directory)
# and srv (the server running in the background, if any); the EXIT trap
# stops a server left behind by a run that died.
bench_setup() {
  bench_plumb
  PEERS=${PEERS:-$(bash ../shared/peers/build.sh)}
  work=$(mktemp -d)
  srv=
  trap bench_cleanup EXIT
}

bench_cleanup() {
  if [[ -n $srv ]]; then kill "$srv" 2>/dev/null || true; fi
  rm -rf "$work"
}

# stop_srv: reaps the server too, so that it is gone before the next tool
# starts measuring.
stop_srv() {
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  srv=
}

# write_section FILE HEADING_RE SECTION_FILE: puts the section held in
# SECTION_FILE into FILE in place of the one whose heading matches HEADING_RE
# (a Python regular expression), or at its end when it has none, so that a
# script refreshes its own section and leaves the others' alone; then prints
# the section.
write_section() {
  python3 - "$@" <<'PY'
import os, re, sys
out, heading, section = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
text = open(out).read() if os.path.exists(out) else "# Benchmarks\n\nEach section is written by the script it names; rerun it to refresh.\n\n"
pat = re.compile(heading + r".*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda m: section.rstrip() + "\n", text) if pat.search(text) else text.rstrip() + "\n\n" + section
open(out, "w").write(text)
print(section)
PY
}

# bench_rotate REPS CASE...: each repetition runs every case through the
# script's run function, starting one case further each time, so that no
# case always follows the same one; a case is "NAME ARGS..." and its
# records go to $work/NAME-$rep.json.
bench_rotate() {
  local reps=$1 n k
  shift
  local cases=("$@")
  n=${#cases[@]}
  for rep in $(seq 1 "$reps"); do
    for k in $(seq 0 $((n - 1))); do
      # shellcheck disable=SC2086
      run ${cases[$(((k + rep) % n))]}
    done
  done
}
