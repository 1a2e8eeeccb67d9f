//! The one figure a comparison decides on where a point's headline is not
//! what matters. A load run's headline is its probes' rate, which their
//! schedule fixes; what a qdisc, a congestion control or a kernel moves is
//! how long the probes wait under load. `check` and `bisect` take a
//! [`Figure`] (`self:p99@both`: the self probes' 99th percentile while both
//! loads ran; `rpm@download`) and judge each point that has it on that
//! figure alone, with its direction: more latency is worse, more round
//! trips a minute better.

use crate::{complete_iterations, side_stats, Comparison, Side};
use plumb_samples::load::{probes, stretches, Stretch};
use plumb_samples::{rpm, Iteration, Latency, Metric};
use plumb_spec::load::{Load, PHASES};
use plumb_stats::CompareParams;
use std::str::FromStr;

/// What is taken of a probe's latency over the stretches chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    P50,
    P90,
    P99,
    Max,
}

impl Stat {
    const NAMES: [(&'static str, Stat); 4] = [
        ("p50", Stat::P50),
        ("p90", Stat::P90),
        ("p99", Stat::P99),
        ("max", Stat::Max),
    ];

    fn of(self, l: &Latency) -> f64 {
        let us = match self {
            Stat::P50 => l.p50_us,
            Stat::P90 => l.p90_us,
            Stat::P99 => l.p99_us,
            Stat::Max => l.max_us,
        };
        us / 1000.0
    }
}

/// A figure of a run of parts' probes over the stretches in which a given
/// set of loads ran, one value per iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// How it was asked for, as the verdict names it.
    pub text: String,
    /// A probe's latency (its name: `run`, `udp`, its ways `udp-up` and
    /// `udp-down`, `connect`, `self` or a part's) or, with None, the responsiveness.
    pub probe: Option<(String, Stat)>,
    /// The loads that ran, by part name, sorted; empty for none.
    pub loads: Vec<String>,
}

impl FromStr for Figure {
    type Err = String;

    /// `PROBE:STAT@LOADS` or `rpm@LOADS`, where STAT is p50, p90, p99 or
    /// max, and LOADS a phase of `plumb run load` (idle, download, upload,
    /// both) or part names joined by `+`.
    fn from_str(s: &str) -> Result<Figure, String> {
        let form = "write PROBE:STAT@LOADS (self:p99@both) or rpm@LOADS";
        let (what, loads) = s
            .split_once('@')
            .ok_or_else(|| format!("'{s}' names no loads; {form}"))?;
        let probe = match what.split_once(':') {
            None if what == "rpm" => None,
            None => return Err(format!("'{what}' is neither rpm nor PROBE:STAT; {form}")),
            Some((probe, stat)) => {
                let stat = Stat::NAMES
                    .iter()
                    .find(|(n, _)| *n == stat)
                    .map(|(_, s)| *s)
                    .ok_or_else(|| format!("'{stat}' is not p50, p90, p99 or max"))?;
                if probe.is_empty() {
                    return Err(format!("'{what}' names no probe; {form}"));
                }
                Some((probe.to_string(), stat))
            }
        };
        Ok(Figure {
            text: s.to_string(),
            probe,
            loads: phase_loads(loads)?,
        })
    }
}

/// The loads a phase of `plumb run load` runs, or the part names written
/// out, sorted.
fn phase_loads(s: &str) -> Result<Vec<String>, String> {
    let mut loads: Vec<String> = match PHASES.iter().find(|(name, _)| *name == s) {
        Some((_, loads)) => loads
            .iter()
            .map(|l| match l {
                Load::Down(n) | Load::Up(n) => n.to_string(),
            })
            .collect(),
        None => s.split('+').map(|n| n.trim().to_string()).collect(),
    };
    if loads.iter().any(String::is_empty) {
        return Err(format!(
            "'{s}' is not a phase (idle, download, upload, both) nor part names joined by +"
        ));
    }
    loads.sort();
    Ok(loads)
}

impl Figure {
    /// The metric a point decided on it is judged in.
    pub fn metric(&self) -> Metric {
        match self.probe {
            Some(_) => Metric::Latency,
            None => Metric::Rpm,
        }
    }

    /// The stretches of `it` in which exactly the figure's loads ran, as
    /// one: their seconds one after another, their latencies merged.
    fn stretch(&self, it: &Iteration) -> Option<Stretch> {
        let mut chosen = stretches(it).into_iter().filter(|s| {
            let mut running = s.running.clone();
            running.sort();
            running == self.loads
        });
        let mut one = chosen.next()?;
        for s in chosen {
            for (mine, theirs) in one.seconds.iter_mut().zip(s.seconds) {
                mine.extend(theirs);
            }
        }
        one.latency = (one.seconds.iter())
            .map(|each| Latency::from_buckets(&each.concat()))
            .collect();
        Some(one)
    }

    /// Its value in iteration `it`, where the iteration has the probe (or,
    /// for the responsiveness, the connect and self probes) timed in a
    /// stretch where the figure's loads ran.
    pub fn of(&self, it: &Iteration) -> Option<f64> {
        let stretch = self.stretch(it)?;
        match &self.probe {
            Some((probe, stat)) => {
                let i = probes(it).iter().position(|p| p.name() == *probe)?;
                Some(stat.of(stretch.latency.get(i)?.as_ref()?))
            }
            None => Some(rpm::of(it, &stretch)?.rpm),
        }
    }
}

/// Judges each point of `c` that has `figure` in every complete iteration
/// of both sides on it rather than its headline: its means, change, ratio,
/// verdict (with the figure's direction) and iterations needed become the
/// figure's, and it is named in the point's summary. The other points keep
/// theirs but no longer decide (see [`crate::bisect_for`]). An error where
/// no point has the figure.
pub fn decide_on(
    c: &mut Comparison,
    a: &Side,
    b: &Side,
    figure: &Figure,
    params: &CompareParams,
) -> Result<(), String> {
    let metric = figure.metric();
    let params = CompareParams {
        higher_is_better: metric.higher_is_better(),
        ..*params
    };
    let values = |s: &Side, key: &str| -> Option<Vec<f64>> {
        let its = complete_iterations(s, key);
        let xs: Vec<f64> = its.iter().filter_map(|it| figure.of(it)).collect();
        (!xs.is_empty() && xs.len() == its.len()).then_some(xs)
    };
    c.decided_on = Some(figure.text.clone());
    for p in &mut c.points {
        p.decides = false;
        let (Some(xa), Some(xb)) = (values(a, &p.key_a), values(b, &p.key_b)) else {
            continue;
        };
        let runs = (p.a.runs, p.b.runs);
        p.metric = metric;
        p.unit = metric.unit();
        p.decides = true;
        p.summary = format!("{}, on {}", p.summary, figure.text);
        p.a = side_stats(&xa, params.level, runs.0);
        p.b = side_stats(&xb, params.level, runs.1);
        p.bimodal.clear();
        p.judge(
            plumb_stats::compare(&xa, &xb, &params).as_ref(),
            params.noise_band,
        );
    }
    if !c.points.iter().any(|p| p.decides) {
        return Err(format!(
            "no point of {} and {} has {} in every iteration (a run of parts with {} timed while {} ran)",
            c.a,
            c.b,
            figure.text,
            figure
                .probe
                .as_ref()
                .map_or("connect and self probes".to_string(), |(p, _)| format!("probe {p}")),
            if figure.loads.is_empty() {
                "no load".to_string()
            } else {
                figure.loads.join(" + ")
            }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::tests::loaded;
    use crate::{bisect_for, compare, Bisect, Change};
    use plumb_stats::Verdict;

    /// A side of four runs' iterations whose probes waited `loaded_ms`
    /// while the download ran.
    fn side(name: &str, loaded_ms: f64) -> Side {
        let mut r = plumb_samples::testing::example();
        r.complete = true;
        r.iterations = [0.0, 0.3, 0.6, 0.9]
            .map(|j| {
                let mut it = loaded(loaded_ms, j);
                it.complete = true;
                it
            })
            .to_vec();
        Side::new(name, vec![r], None)
    }

    fn decided(a: &Side, b: &Side, figure: &str) -> Result<Comparison, String> {
        let mut c = compare(a, b, &CompareParams::default());
        decide_on(&mut c, a, b, &figure.parse()?, &CompareParams::default())?;
        Ok(c)
    }

    #[test]
    fn a_figure_is_a_probe_statistic_or_the_responsiveness_over_a_phase_or_parts() {
        let f: Figure = "self:p99@both".parse().unwrap();
        assert_eq!(f.probe, Some(("self".to_string(), Stat::P99)));
        assert_eq!(f.loads, ["both-down", "both-up"]);
        assert_eq!(f.metric(), Metric::Latency);
        let f: Figure = "rpm@download".parse().unwrap();
        assert_eq!(
            (f.metric(), f.probe, f.loads),
            (Metric::Rpm, None, vec!["download".to_string()])
        );
        assert!("run:p50@idle".parse::<Figure>().unwrap().loads.is_empty());
        assert_eq!(
            "udp:max@up + down".parse::<Figure>().unwrap().loads,
            ["down", "up"]
        );
        for (bad, says) in [
            ("self:p99", "names no loads"),
            ("self:p95@both", "'p95' is not"),
            ("latency@both", "neither rpm nor"),
            (":p50@both", "names no probe"),
            ("run:p50@a++b", "nor part names"),
        ] {
            let e = bad.parse::<Figure>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn more_latency_under_load_is_a_regression_that_a_bisect_calls_bad() {
        let (shallow, deep) = (side("shallow", 10.0), side("deep", 80.0));
        let c = decided(&shallow, &deep, "run:p50@download").unwrap();
        let p = &c.points[0];
        assert!(
            p.decides && p.summary.ends_with(", on run:p50@download"),
            "{p:?}"
        );
        assert_eq!((p.metric, p.unit), (Metric::Latency, "ms"));
        // The loaded seconds' medians: 80 ms and a little, against 10.
        assert!(
            p.a.mean > 10.0 && p.a.mean < 12.0 && p.b.mean > 80.0,
            "{p:?}"
        );
        assert!(p.ratio_lo > 1.0 && p.change > 5.0, "{p:?}");
        assert_eq!(p.verdict, Verdict::Regression);
        assert_eq!(bisect_for(&c, 0.05, Change::Worse), Bisect::Bad);
        assert_eq!(bisect_for(&c, 0.05, Change::Better), Bisect::Good);
        // The other way it is a fix; idle, the probes waited alike.
        let back = decided(&deep, &shallow, "run:p50@download").unwrap();
        assert_eq!(back.points[0].verdict, Verdict::Improvement);
        assert_eq!(bisect_for(&back, 0.05, Change::Worse), Bisect::Good);
        assert_eq!(bisect_for(&back, 0.05, Change::Better), Bisect::Bad);
        let idle = decided(&shallow, &deep, "run:max@idle").unwrap();
        assert_eq!(idle.points[0].verdict, Verdict::NoChange);
        assert_eq!(bisect_for(&idle, 0.05, Change::Any), Bisect::Good);
        // On its headline alone (the probes' rate, equal) nothing moved.
        let headline = compare(&shallow, &deep, &CompareParams::default());
        assert_eq!(bisect_for(&headline, 0.05, Change::Any), Bisect::Good);
    }

    #[test]
    fn a_figure_no_point_has_is_an_error_naming_what_is_missing() {
        let (a, b) = (side("a", 10.0), side("b", 80.0));
        let e = decided(&a, &b, "self:p99@download").unwrap_err();
        assert!(e.contains("probe self timed while download ran"), "{e}");
        let e = decided(&a, &b, "run:p99@upload").unwrap_err();
        assert!(e.contains("while upload ran"), "{e}");
        let e = decided(&a, &b, "rpm@download").unwrap_err();
        assert!(e.contains("connect and self probes"), "{e}");
    }
}
