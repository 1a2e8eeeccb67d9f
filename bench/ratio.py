"""The ratio of two cases over paired repetitions, with its interval: what
every comparison in BENCHMARKS.md calls a difference by (one only where
the interval leaves 1 out). Imported by the bench scripts' Python."""
import math
import statistics

# Two-sided 95 % Student-t critical values by degrees of freedom.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]


def ratio_interval(pairs):
    """Geometric mean of b/a over paired repetitions (a, b), and its 95 %
    Student-t interval; None with fewer than two pairs."""
    logs = [math.log(b / a) for a, b in pairs if a > 0 and b > 0]
    if len(logs) < 2:
        return None
    m = statistics.mean(logs)
    half = T95[min(len(logs) - 2, len(T95) - 1)] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def called(interval, above="faster", below="slower"):
    """What a ratio's interval lets one say."""
    if interval is None:
        return "too few repetitions"
    _, lo, hi = interval
    return below if hi < 1 else above if lo > 1 else "no difference"


def shown(interval, above="faster", below="slower"):
    """A ratio's interval as a table cell: `1.234 [1.100, 1.380] faster`."""
    if interval is None:
        return "too few repetitions"
    return f"{interval[0]:.3f} [{interval[1]:.3f}, {interval[2]:.3f}] {called(interval, above, below)}"


def spread(values, fmt):
    """Median and min-max of `values` as a table cell, each by `fmt`."""
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"
