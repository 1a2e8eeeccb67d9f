"""What the bench scripts that run plumb alone read back (bench_record in
lib.sh writes the records): an iteration of a case's record, and the
machine it ran on, as a section states it."""
import json
import os
import platform


def iteration(work, name, rep):
    """The first iteration of case `name`'s record of repetition `rep`, or
    None where the run failed."""
    try:
        return json.load(open(os.path.join(work, f"{name}-{rep}.json")))["iterations"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def machine():
    """`N CPUs (model), kernel R`."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), "")
    return f"{os.cpu_count()} CPUs ({model}), kernel {platform.release()}"
