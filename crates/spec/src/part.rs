//! A run of several workloads. The spec's own workload is the run's main
//! part; each other part is a workload with its own flows, direction, sizes
//! and options, written `NAME=WORKLOAD[:KEY=VALUE]...` (`--part
//! load=stream:flows=4:direction=both:start=2s`, or a `[[part]]` block of an
//! experiment file), its keys those of experiment files. A part starts at
//! its offset into the window (`start`, whole seconds; none starts it with
//! the main part, warm-up included) and is measured from there to the
//! window's close, or to its own `stop` before it. What belongs to the run as a whole (its window, warm-up,
//! family, CPUs, path, server and machine) is the main part's, and a part
//! takes it from there ([`Spec::part_spec`]).

use crate::field::{Field, Names};
use crate::validate::SpecError;
use crate::{build, parse_duration, units, Spec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One more workload in a run, beside the spec's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Part {
    /// What reports call it, and what pairs a part of one run with its
    /// namesake in another.
    #[schemars(pattern(r"^[a-z0-9_-]{1,32}$"))]
    pub name: String,
    /// Its traffic starts this long after the window opens; 0 starts it
    /// with the main part, before the warm-up.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub start_ms: u64,
    /// Its traffic stops this long after the window opens, before the
    /// window closes; absent, it runs to the window's close.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schemars(range(min = 1000))]
    pub stop_ms: Option<u64>,
    /// Its own fields; those of the run as a whole stay at the workload's
    /// defaults here, so that they do not move the run's key.
    pub spec: Spec,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the run's own workload is called beside its parts.
pub const MAIN: &str = "main";

/// The key of a part's offset into the window.
pub const START: &str = "start";

/// The key of the offset into the window at which a part stops.
pub const STOP: &str = "stop";

/// The fields of the run as a whole: a part takes them from the run and
/// may not set them.
pub const RUN_WIDE: &[Field] = &[
    Field::Duration,
    Field::Warmup,
    Field::Family,
    Field::ClientCpus,
    Field::ServerCpus,
    Field::Topology,
    Field::Mtu,
    Field::Delay,
    Field::Loss,
    Field::LinkRate,
    Field::Queue,
    Field::Emulator,
    Field::PathCpus,
    Field::Qdisc,
    Field::Part,
];

/// A part's name: what reports print and `compare` pairs by.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err(format!("a part's name is 1 to 32 characters, got '{name}'"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "'{name}' holds '{c}': a part's name is lower-case letters, digits, - and _"
        ));
    }
    if name == MAIN {
        return Err(format!(
            "'{MAIN}' names the run's own workload; give the part another name"
        ));
    }
    Ok(())
}

impl Part {
    /// Parses `NAME=WORKLOAD[:KEY=VALUE]...`; an error names the item at
    /// fault.
    pub fn parse(text: &str) -> Result<Part, String> {
        let mut items = text.split(':');
        let head = items.next().unwrap_or_default();
        let Some((name, workload)) = head.split_once('=') else {
            return Err(format!(
                "'{text}' does not start with NAME=WORKLOAD, as in load=stream:flows=4"
            ));
        };
        check_name(name)?;
        let mut settings = vec![(Field::Workload, workload)];
        let (mut start_ms, mut stop_ms) = (0, None);
        for item in items {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("part {name}: '{item}' is not KEY=VALUE"))?;
            if key == START || key == STOP {
                let ms = parse_second(value).map_err(|m| format!("part {name}: {key}: {m}"))?;
                match key {
                    START => start_ms = ms,
                    _ => stop_ms = Some(ms),
                }
                continue;
            }
            let field = Field::from_key(key).ok_or_else(|| {
                format!("part {name}: '{key}' is not a spec field (keys as in experiment files)")
            })?;
            if let Some(m) = refused(field) {
                return Err(format!("part {name}: {key} {m}"));
            }
            settings.push((field, value));
        }
        let spec = build(&settings, Names::Keys)
            .map_err(|e| format!("part {name}: {}: {}", e.field.key(), e.message))?;
        Ok(Part {
            name: name.to_string(),
            start_ms,
            stop_ms,
            spec,
        })
    }

    /// The part as [`Part::parse`] reads it: its name and workload, each
    /// field that differs from the workload's default, and its start.
    pub fn text(&self) -> String {
        let defaults = Spec::defaults(self.spec.workload);
        let mut text = format!("{}={}", self.name, self.spec.workload);
        for &field in Field::ALL {
            if field == Field::Workload || RUN_WIDE.contains(&field) {
                continue;
            }
            // Fields that only set others have no value of their own.
            let Some(v) = self.spec.value_of(field) else {
                continue;
            };
            if Some(&v) != defaults.value_of(field).as_ref() {
                text += &format!(":{}={v}", field.key());
            }
        }
        if self.start_ms > 0 {
            text += &format!(":{START}={}", units::show_ms(self.start_ms));
        }
        if let Some(ms) = self.stop_ms {
            text += &format!(":{STOP}={}", units::show_ms(ms));
        }
        text
    }
}

impl Part {
    /// How the run's summary names it: `part load: stream direction=both
    /// flows=4 start=2s`.
    pub fn summary(&self) -> String {
        let text = self.text();
        let rest = text.split_once('=').map(|(_, r)| r).unwrap_or_default();
        format!("part {}: {}", self.name, rest.replace(':', " "))
    }
}

/// Why a part may not set `field`, if it may not.
fn refused(field: Field) -> Option<&'static str> {
    match field {
        Field::Workload => Some("comes first, as NAME=WORKLOAD"),
        f if RUN_WIDE.contains(&f) => Some("is the run's, not a part's: set it on the run"),
        _ => None,
    }
}

/// A part's start or stop: whole seconds, since the window moves on by
/// the second.
fn parse_second(text: &str) -> Result<u64, String> {
    let ms = parse_duration(text).map_err(|e| e.to_string())?;
    if ms % 1000 != 0 {
        return Err(format!(
            "'{text}' is not whole seconds; a part starts and stops on the window's seconds"
        ));
    }
    Ok(ms)
}

impl Spec {
    /// `part` as it runs: its own fields, with the run's window, warm-up,
    /// family, CPUs, path, server and machine.
    pub fn part_spec(&self, part: &Part) -> Spec {
        Spec {
            duration_ms: self.duration_ms,
            warmup_ms: self.warmup_ms,
            family: self.family,
            client_cpus: self.client_cpus.clone(),
            server_cpus: self.server_cpus.clone(),
            topology: self.topology.clone(),
            server_host: self.server_host.clone(),
            machine: self.machine.clone(),
            parts: Vec::new(),
            ..part.spec.clone()
        }
    }

    /// Flows over every part, the main one included.
    pub fn all_flows(&self) -> u64 {
        self.flows as u64 + self.parts.iter().map(|p| p.spec.flows as u64).sum::<u64>()
    }

    /// The parts: each named once, each starting inside the window, each a
    /// spec that runs with the run's fields.
    pub(crate) fn validate_parts(&self) -> Result<(), SpecError> {
        let fail = |m: String| SpecError::new(Field::Part, m);
        for (i, p) in self.parts.iter().enumerate() {
            check_name(&p.name).map_err(fail)?;
            if self.parts[..i].iter().any(|q| q.name == p.name) {
                return Err(fail(format!("part '{}' is named twice", p.name)));
            }
            if !p.spec.parts.is_empty() {
                return Err(fail(format!("part '{}' has parts of its own", p.name)));
            }
            if p.start_ms % 1000 != 0 || p.start_ms >= self.duration_ms {
                return Err(fail(format!(
                    "part '{}' starts at {}, which is not a whole second inside the {} window",
                    p.name,
                    units::show_ms(p.start_ms),
                    units::show_ms(self.duration_ms)
                )));
            }
            if let Some(stop) = p.stop_ms {
                if stop % 1000 != 0 || stop <= p.start_ms || stop >= self.duration_ms {
                    return Err(fail(format!(
                        "part '{}' stops at {}, which is not a whole second after its start \
                         ({}) and before the {} window's end",
                        p.name,
                        units::show_ms(stop),
                        units::show_ms(p.start_ms),
                        units::show_ms(self.duration_ms)
                    )));
                }
            }
            self.part_spec(p)
                .validate()
                .map_err(|e| fail(format!("part {}: {}: {}", p.name, e.field.key(), e.message)))?;
        }
        let (lo, hi) = Field::Flows.bounds().expect("flows are bounded");
        if !(lo..=hi).contains(&self.all_flows()) {
            return Err(fail(format!(
                "the parts add up to {} flows; a run has at most {hi}",
                self.all_flows()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_reads_back_as_typed_and_takes_the_runs_fields() {
        let p = Part::parse("load=stream:flows=4:direction=both:start=2s:stop=5s").unwrap();
        assert_eq!(p.name, "load");
        assert_eq!((p.start_ms, p.stop_ms), (2000, Some(5000)));
        assert_eq!(p.spec.flows, 4);
        let text = p.text();
        assert!(
            text.starts_with("load=stream:direction=both:flows=4:")
                && text.ends_with(":start=2s:stop=5s"),
            "{text}"
        );
        assert_eq!(Part::parse(&p.text()).unwrap(), p);
        let mut run = Spec::rr();
        run.duration_ms = 30_000;
        run.parts.push(p.clone());
        let s = run.part_spec(&p);
        assert_eq!(
            (s.duration_ms, s.workload),
            (30_000, crate::Workload::Stream)
        );
        assert!(run.validate().is_ok());
    }

    #[test]
    fn bad_parts_are_refused_by_what_is_wrong() {
        for (text, says) in [
            ("load", "NAME=WORKLOAD"),
            ("Load=stream", "holds 'L'"),
            ("main=stream", "'main' names"),
            ("load=tcp", "workload"),
            ("load=stream:flows", "not KEY=VALUE"),
            ("load=stream:nope=1", "'nope' is not a spec field"),
            ("load=stream:duration=5s", "the run's"),
            ("load=stream:workload=rr", "comes first"),
            ("load=stream:start=1500ms", "whole seconds"),
            ("load=stream:flows=0", "flows"),
            ("load=udp-stream:cc=bbr", "TCP"),
        ] {
            let e = Part::parse(text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
        let mut run = Spec::rr();
        run.parts.push(Part::parse("a=stream:start=10s").unwrap());
        assert!(run
            .validate()
            .unwrap_err()
            .message
            .contains("inside the 10s"));
        run.parts[0].start_ms = 0;
        for stop in ["b=crr:start=2s:stop=2s", "b=crr:stop=10s"] {
            run.parts.push(Part::parse(stop).unwrap());
            assert!(
                run.validate().unwrap_err().message.contains("stops at"),
                "{stop}"
            );
            run.parts.pop();
        }
        run.parts.push(Part::parse("a=crr").unwrap());
        assert!(run.validate().unwrap_err().message.contains("named twice"));
    }

    #[test]
    fn parts_move_the_key_and_none_leaves_it() {
        let one = Spec::rr();
        let key = one.key();
        let mut run = one.clone();
        run.parts.push(Part::parse("load=stream").unwrap());
        assert_ne!(run.key(), key);
        run.parts.clear();
        assert_eq!(run.key(), key);
    }
}
