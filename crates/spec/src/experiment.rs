//! Experiment files: a base spec, a matrix of axes over any spec field,
//! variants (a name, knob settings and spec fields), a label, the repetition
//! policy and the order of execution, in TOML. See docs/experiments.md.
//!
//! Spec fields are named as the flags of `plumb run` are (`msg_size` for
//! `--msg-size`) and take the same values, so a point of an experiment is
//! what one `plumb run` would measure. Every error names the file's line and
//! the key at fault.

use crate::{Field, Names, Spec};
use std::fmt;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// An error in an experiment file, at a line and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentError {
    pub line: usize,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            write!(f, "line {}: {}: {}", self.line, self.key, self.message)
        }
    }
}

impl std::error::Error for ExperimentError {}

/// How the runs of an experiment are ordered, to spread the drift of a
/// machine over every point instead of onto the last ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Each round takes one iteration of every unfinished point in an order
    /// shuffled with the experiment's seed (the default).
    Random,
    /// Each round takes one iteration of every point in file order, variants
    /// alternating: A/B/A/B.
    Interleaved,
    /// All iterations of one point, then the next.
    Sequential,
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Random => "random",
            Order::Interleaved => "interleaved",
            Order::Sequential => "sequential",
        })
    }
}

/// A value as written, with the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub key: String,
    pub value: String,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<Located>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    /// KNOB = VALUE, checked by the run crate (which knows knobs).
    pub knobs: Vec<Located>,
    /// KNOB = VALUE for the server end (in the server's namespace under
    /// `topology = "veth"`, on this host otherwise).
    pub server_knobs: Vec<Located>,
    /// Spec fields this variant sets over the base and the matrix.
    pub set: Vec<Located>,
    /// `profile = true|false`: kernel profiles of this variant's points,
    /// over the experiment's own `profile`.
    pub profile: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    pub label: Option<String>,
    /// The server end, as `plumb run --server` takes it (HOST[:PORT] or
    /// ssh://[USER@]HOST[:SSHPORT]); None runs the embedded server.
    pub server: Option<String>,
    pub base: Vec<Located>,
    pub axes: Vec<Axis>,
    pub variants: Vec<Variant>,
    /// Iterations per point: MIN..MAX (more until the confidence target).
    pub iterations: (u32, u32),
    /// Level and relative half-width of the confidence target.
    pub confidence: (f64, f64),
    pub order: Order,
    /// The seed of a random order; None when the file gave none (the
    /// caller draws one and stores it with the runs).
    pub seed: Option<u64>,
    /// The --quick profile: fields over the base, axes replaced, iterations.
    pub quick: Option<Quick>,
    /// `profile = true`: every point runs with kernel profiles
    /// (`plumb run --profile`).
    pub profile: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Quick {
    pub base: Vec<Located>,
    pub axes: Vec<Axis>,
    pub iterations: Option<(u32, u32)>,
}

pub use crate::point::PointId;

/// One point of the experiment: its coordinates on the axes, its variant
/// and the spec it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Stable within the experiment, so a resumed experiment finds its
    /// stored points again.
    pub id: PointId,
    pub spec: Spec,
}

fn line_of(text: &str, span: &Range<usize>) -> usize {
    text[..span.start.min(text.len())].matches('\n').count() + 1
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: &Range<usize>, key: &str, message: impl Into<String>) -> ExperimentError {
        ExperimentError {
            line: line_of(self.text, span),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// A scalar as the text a flag would take.
    fn scalar(&self, v: &Spanned<DeValue<'_>>, key: &str) -> Result<Located, ExperimentError> {
        let value = match v.get_ref() {
            DeValue::String(s) => s.to_string(),
            DeValue::Integer(i) => {
                let digits = i.as_str().replace('_', "");
                i64::from_str_radix(&digits, i.radix())
                    .map_err(|_| self.err(&v.span(), key, "not an integer"))?
                    .to_string()
            }
            DeValue::Float(f) => f.as_str().replace('_', ""),
            DeValue::Boolean(b) => b.to_string(),
            _ => return Err(self.err(&v.span(), key, "expected a string, number or boolean")),
        };
        Ok(Located {
            key: key.to_string(),
            value,
            line: line_of(self.text, &v.span()),
        })
    }

    fn table<'t>(
        &self,
        v: &'t Spanned<DeValue<'_>>,
        key: &str,
    ) -> Result<&'t DeTable<'t>, ExperimentError> {
        match v.get_ref() {
            DeValue::Table(t) => Ok(t),
            _ => Err(self.err(&v.span(), key, "expected a table")),
        }
    }

    fn boolean(&self, v: &Spanned<DeValue<'_>>, key: &str) -> Result<bool, ExperimentError> {
        match v.get_ref() {
            DeValue::Boolean(b) => Ok(*b),
            _ => Err(self.err(&v.span(), key, "expected true or false")),
        }
    }

    fn string(&self, v: &Spanned<DeValue<'_>>, key: &str) -> Result<String, ExperimentError> {
        match v.get_ref() {
            DeValue::String(s) => Ok(s.to_string()),
            _ => Err(self.err(&v.span(), key, "expected a string")),
        }
    }

    fn fields(&self, t: &DeTable<'_>, prefix: &str) -> Result<Vec<Located>, ExperimentError> {
        let mut out = Vec::new();
        for (k, v) in t {
            let key = format!("{prefix}{}", k.get_ref());
            let loc = self.scalar(v, &key)?;
            check_field_name(k.get_ref()).map_err(|m| self.err(&k.span(), &key, m))?;
            out.push(Located {
                key: k.get_ref().to_string(),
                ..loc
            });
        }
        Ok(out)
    }

    /// A `[[part]]` block as the `part` field it stands for:
    /// `NAME=WORKLOAD[:KEY=VALUE]...`, from its `name`, its `workload` and
    /// its other keys (spec keys, and `start`).
    fn part(&self, item: &Spanned<DeValue<'_>>, at: &str) -> Result<Located, ExperimentError> {
        let (mut name, mut workload, mut rest) = (None, None, Vec::new());
        for (k, v) in self.table(item, at)? {
            let l = self.scalar(v, &format!("{at}.{}", k.get_ref()))?;
            match k.get_ref().as_ref() {
                "name" => name = Some(l.value),
                "workload" => workload = Some(l.value),
                key => rest.push(format!("{key}={}", l.value)),
            }
        }
        let (Some(name), Some(workload)) = (name, workload) else {
            return Err(self.err(&item.span(), at, "a part needs a name and a workload"));
        };
        let text = std::iter::once(format!("{name}={workload}"))
            .chain(rest)
            .collect::<Vec<_>>()
            .join(":");
        Ok(Located {
            key: crate::Field::Part.key().to_string(),
            value: text,
            line: line_of(self.text, &item.span()),
        })
    }

    fn axes(&self, t: &DeTable<'_>, prefix: &str) -> Result<Vec<Axis>, ExperimentError> {
        let mut out = Vec::new();
        for (k, v) in t {
            let key = format!("{prefix}{}", k.get_ref());
            check_field_name(k.get_ref()).map_err(|m| self.err(&k.span(), &key, m))?;
            let DeValue::Array(items) = v.get_ref() else {
                return Err(self.err(&v.span(), &key, "an axis is a list of values"));
            };
            if items.is_empty() {
                return Err(self.err(&v.span(), &key, "an axis needs at least one value"));
            }
            let mut values = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let mut loc = self.scalar(item, &format!("{key}[{i}]"))?;
                loc.key = k.get_ref().to_string();
                values.push(loc);
            }
            out.push(Axis {
                key: k.get_ref().to_string(),
                values,
            });
        }
        Ok(out)
    }
}

fn check_field_name(key: &str) -> Result<(), String> {
    match Field::from_key(key) {
        Some(_) => Ok(()),
        None if [crate::load::PHASE_KEY, crate::load::LOAD_FLOWS_KEY].contains(&key) => Ok(()),
        None => {
            let keys: Vec<&str> = Field::ALL.iter().map(|f| f.key()).collect();
            Err(format!(
                "'{key}' is not a spec field; use one of {}",
                keys.join(", ")
            ))
        }
    }
}

/// Builds a spec from fields in order, through the same path as `plumb
/// run` (see [`crate::build`]); an error comes with the line and key at
/// fault (for a spec that cannot run as a whole, the last field's line).
pub fn build_spec(fields: &[&Located]) -> Result<Spec, (usize, String, String)> {
    let load = fields
        .iter()
        .rfind(|l| l.key == Field::Workload.key())
        .is_some_and(|l| l.value == crate::load::WORKLOAD);
    let (mut phase_s, mut flows) = (crate::load::PHASE_S, crate::load::LOAD_FLOWS);
    // Each setting with the line it came from; a load run's preset comes
    // first, at the line of its `workload`.
    let mut settings: Vec<(Field, String, usize)> = Vec::with_capacity(fields.len());
    for l in fields {
        let at = |m: String| (l.line, l.key.clone(), m);
        match (l.key.as_str(), Field::from_key(&l.key)) {
            (k, None) if load && k == crate::load::PHASE_KEY => {
                phase_s = crate::load::parse_phase(&l.value).map_err(at)?
            }
            (k, None) if load && k == crate::load::LOAD_FLOWS_KEY => {
                flows = crate::load::parse_load_flows(&l.value).map_err(at)?
            }
            (k, None) if [crate::load::PHASE_KEY, crate::load::LOAD_FLOWS_KEY].contains(&k) => {
                return Err(at(format!(
                    "'{k}' is a key of workload \"{}\" only",
                    crate::load::WORKLOAD
                )))
            }
            (_, None) => return Err(at(check_field_name(&l.key).unwrap_err())),
            (_, Some(field)) => settings.push((field, l.value.clone(), l.line)),
        }
    }
    if load {
        let line = fields
            .iter()
            .rfind(|l| l.key == Field::Workload.key())
            .map_or(1, |l| l.line);
        let lines: Vec<(Field, usize)> = settings.iter().map(|s| (s.0, s.2)).collect();
        let own: Vec<(Field, String)> = settings.drain(..).map(|s| (s.0, s.1)).collect();
        let expanded = crate::load::expand(phase_s, flows, own).map_err(|(field, m)| {
            let at = lines.iter().find(|l| l.0 == field).map_or(line, |l| l.1);
            (at, field.key().to_string(), m)
        })?;
        // The preset's own settings stand at the workload's line; the
        // user's follow in their order, with their lines.
        let preset = expanded.len() - lines.iter().filter(|l| l.0 != Field::Workload).count();
        let mut user = lines.iter().filter(|l| l.0 != Field::Workload);
        for (i, (field, value)) in expanded.into_iter().enumerate() {
            let at = if i < preset {
                line
            } else {
                user.next().map_or(line, |l| l.1)
            };
            settings.push((field, value, at));
        }
    }
    let pairs: Vec<(Field, &str)> = settings.iter().map(|s| (s.0, s.1.as_str())).collect();
    crate::build(&pairs, Names::Keys).map_err(|e| {
        // A check of the whole spec names the field it refuses: the line
        // that set it, where one did.
        let set_it = settings.iter().rfind(|s| s.0 == e.field);
        let line = match e.at {
            Some(at) => settings[at].2,
            None => set_it.or(settings.last()).map_or(1, |s| s.2),
        };
        (line, e.field.key().to_string(), e.message)
    })
}

impl Experiment {
    /// Parses an experiment file and builds every point once, so an error
    /// anywhere (a bad size on an axis, a field a workload does not have)
    /// is found before anything runs.
    pub fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        let cx = Ctx { text };
        let doc = DeTable::parse(text).map_err(|e| ExperimentError {
            line: e.span().map(|s| line_of(text, &s)).unwrap_or(1),
            key: String::new(),
            message: e.message().trim().to_string(),
        })?;
        let mut exp = Experiment {
            name: String::new(),
            description: None,
            label: None,
            server: None,
            base: Vec::new(),
            axes: Vec::new(),
            variants: Vec::new(),
            iterations: (3, 10),
            confidence: (0.95, 0.025),
            order: Order::Random,
            seed: None,
            quick: None,
            profile: false,
        };
        let mut name_line = None;
        // [[part]] blocks, each a `part` field of the base in the form
        // `--part` takes, added once the base is read.
        let mut parts = Vec::new();
        for (k, v) in doc.get_ref() {
            let key = k.get_ref().as_ref();
            match key {
                "name" => {
                    exp.name = cx.string(v, key)?;
                    name_line = Some(v.span());
                }
                "description" => exp.description = Some(cx.string(v, key)?),
                "label" => {
                    let label = cx.string(v, key)?;
                    crate::check_label(&label).map_err(|e| cx.err(&v.span(), key, e.0))?;
                    exp.label = Some(label);
                }
                "server" => exp.server = Some(cx.string(v, key)?),
                "iterations" => {
                    let l = cx.scalar(v, key)?;
                    exp.iterations =
                        crate::parse_iterations(&l.value).map_err(|m| cx.err(&v.span(), key, m))?;
                }
                "confidence" => {
                    let l = cx.scalar(v, key)?;
                    exp.confidence =
                        crate::parse_confidence(&l.value).map_err(|m| cx.err(&v.span(), key, m))?;
                }
                "order" => {
                    exp.order = match cx.string(v, key)?.as_str() {
                        "random" => Order::Random,
                        "interleaved" => Order::Interleaved,
                        "sequential" => Order::Sequential,
                        o => {
                            return Err(cx.err(
                                &v.span(),
                                key,
                                format!("'{o}' is not random, interleaved or sequential"),
                            ))
                        }
                    }
                }
                "seed" => {
                    let l = cx.scalar(v, key)?;
                    exp.seed = Some(
                        l.value
                            .parse()
                            .map_err(|_| cx.err(&v.span(), key, "not a whole number"))?,
                    );
                }
                "profile" => exp.profile = cx.boolean(v, key)?,
                "base" => exp.base = cx.fields(cx.table(v, key)?, "base.")?,
                "matrix" => exp.axes = cx.axes(cx.table(v, key)?, "matrix.")?,
                "part" => {
                    let DeValue::Array(items) = v.get_ref() else {
                        return Err(cx.err(&v.span(), key, "write parts as [[part]] blocks"));
                    };
                    for (i, item) in items.iter().enumerate() {
                        parts.push(cx.part(item, &format!("part[{i}]"))?);
                    }
                }
                "variant" => {
                    let DeValue::Array(items) = v.get_ref() else {
                        return Err(cx.err(&v.span(), key, "write variants as [[variant]] blocks"));
                    };
                    for (i, item) in items.iter().enumerate() {
                        let at = format!("variant[{i}]");
                        let t = cx.table(item, &at)?;
                        let mut var = Variant {
                            name: String::new(),
                            knobs: Vec::new(),
                            server_knobs: Vec::new(),
                            set: Vec::new(),
                            profile: None,
                        };
                        for (vk, vv) in t {
                            let vkey = format!("{at}.{}", vk.get_ref());
                            match vk.get_ref().as_ref() {
                                "name" => var.name = cx.string(vv, &vkey)?,
                                "profile" => var.profile = Some(cx.boolean(vv, &vkey)?),
                                which @ ("knobs" | "server_knobs") => {
                                    let into = if which == "knobs" {
                                        &mut var.knobs
                                    } else {
                                        &mut var.server_knobs
                                    };
                                    for (kk, kv) in cx.table(vv, &vkey)? {
                                        let mut l =
                                            cx.scalar(kv, &format!("{vkey}.{}", kk.get_ref()))?;
                                        l.key = kk.get_ref().to_string();
                                        into.push(l);
                                    }
                                }
                                "set" => {
                                    var.set =
                                        cx.fields(cx.table(vv, &vkey)?, &format!("{vkey}."))?
                                }
                                other => {
                                    return Err(cx.err(
                                        &vk.span(),
                                        &vkey,
                                        format!(
                                        "'{other}' is not a variant key; use name, knobs, server_knobs, set or profile"
                                    ),
                                    ))
                                }
                            }
                        }
                        if var.name.is_empty() {
                            return Err(cx.err(&item.span(), &at, "a variant needs a name"));
                        }
                        if exp.variants.iter().any(|x| x.name == var.name) {
                            return Err(cx.err(
                                &item.span(),
                                &format!("{at}.name"),
                                format!("variant '{}' is named twice", var.name),
                            ));
                        }
                        exp.variants.push(var);
                    }
                }
                "quick" => {
                    let t = cx.table(v, key)?;
                    let mut q = Quick {
                        base: Vec::new(),
                        axes: Vec::new(),
                        iterations: None,
                    };
                    for (qk, qv) in t {
                        let qkey = format!("quick.{}", qk.get_ref());
                        match qk.get_ref().as_ref() {
                            "base" => q.base = cx.fields(cx.table(qv, &qkey)?, "quick.base.")?,
                            "matrix" => q.axes = cx.axes(cx.table(qv, &qkey)?, "quick.matrix.")?,
                            "iterations" => {
                                let l = cx.scalar(qv, &qkey)?;
                                q.iterations = Some(
                                    crate::parse_iterations(&l.value)
                                        .map_err(|m| cx.err(&qv.span(), &qkey, m))?,
                                );
                            }
                            other => {
                                return Err(cx.err(
                                    &qk.span(),
                                    &qkey,
                                    format!(
                                    "'{other}' is not a quick key; use base, matrix or iterations"
                                ),
                                ))
                            }
                        }
                    }
                    exp.quick = Some(q);
                }
                other => {
                    return Err(cx.err(
                        &k.span(),
                        other,
                        format!(
                            "'{other}' is not an experiment key; use name, description, label, \
                             server, base, part, matrix, variant, iterations, confidence, order, \
                             seed or quick"
                        ),
                    ))
                }
            }
        }
        exp.base.extend(parts);
        if exp.name.is_empty() {
            return Err(ExperimentError {
                line: 1,
                key: "name".into(),
                message: "an experiment needs a name".into(),
            });
        }
        if !exp
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(cx.err(
                &name_line.unwrap_or(0..0),
                "name",
                "use letters, digits, '-', '_' and '.' only",
            ));
        }
        if let Some(q) = &exp.quick {
            for a in &q.axes {
                if !exp.axes.iter().any(|x| x.key == a.key) {
                    return Err(ExperimentError {
                        line: a.values[0].line,
                        key: format!("quick.matrix.{}", a.key),
                        message: format!("the matrix has no axis '{}'", a.key),
                    });
                }
            }
            exp.quick_profile().points()?;
        }
        exp.points()?;
        Ok(exp)
    }

    /// The experiment with its quick profile applied (itself when it has
    /// none).
    pub fn quick_profile(&self) -> Experiment {
        let mut e = self.clone();
        if let Some(q) = self.quick.clone() {
            e.base.retain(|l| !q.base.iter().any(|x| x.key == l.key));
            e.base.extend(q.base);
            for a in q.axes {
                if let Some(x) = e.axes.iter_mut().find(|x| x.key == a.key) {
                    x.values = a.values;
                }
            }
            if let Some(i) = q.iterations {
                e.iterations = i;
            }
        }
        e.quick = None;
        e
    }

    /// Every point: the product of the axes (the first axis outermost), and
    /// for each, every variant (innermost, so interleaving alternates them).
    pub fn points(&self) -> Result<Vec<Point>, ExperimentError> {
        let mut combos: Vec<Vec<&Located>> = vec![Vec::new()];
        for a in &self.axes {
            let mut next = Vec::new();
            for c in &combos {
                for v in &a.values {
                    let mut c2 = c.clone();
                    c2.push(v);
                    next.push(c2);
                }
            }
            combos = next;
        }
        let variants: Vec<Option<&Variant>> = if self.variants.is_empty() {
            vec![None]
        } else {
            self.variants.iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for c in &combos {
            for v in &variants {
                let mut fields: Vec<&Located> = self.base.iter().collect();
                fields.extend(c.iter().copied());
                if let Some(v) = v {
                    fields.extend(v.set.iter());
                }
                let spec = build_spec(&fields).map_err(|(line, key, message)| ExperimentError {
                    line,
                    key,
                    message,
                })?;
                out.push(Point {
                    id: PointId {
                        coords: c.iter().map(|l| (l.key.clone(), l.value.clone())).collect(),
                        variant: v.map(|v| v.name.clone()),
                    },
                    spec,
                });
            }
        }
        Ok(out)
    }
}

/// One `plumb run` as an experiment file of one point, for a lab's agents
/// to make (`plumb run --lab`): its fields as typed, in the order given,
/// its repetition policy, label and far server, and its knobs, which make
/// the one variant `run` (a point with none has no variant).
pub struct RunFile<'a> {
    /// The workload first, as `plumb run` builds a spec.
    pub settings: &'a [(Field, String)],
    pub iterations: (u32, u32),
    /// Level and relative width, as fractions.
    pub confidence: (f64, f64),
    pub label: Option<&'a str>,
    pub server: Option<&'a str>,
    pub profile: bool,
    /// `KNOB`, `VALUE` as `--knob KNOB=VALUE` gives them.
    pub knobs: &'a [(String, String)],
    pub server_knobs: &'a [(String, String)],
}

impl RunFile<'_> {
    /// The file's text; [`Experiment::parse`] reads it back as this run.
    pub fn text(&self) -> String {
        let percent = |f: f64| {
            let t = format!("{:.6}", f * 100.0);
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        let (min, max) = self.iterations;
        let mut t = String::from("name = \"run\"\n");
        t += &format!("iterations = \"{min}..{max}\"\n");
        let (level, width) = self.confidence;
        t += &format!("confidence = \"{}:{}\"\n", percent(level), percent(width));
        if let Some(l) = self.label {
            t += &format!("label = {}\n", quoted(l));
        }
        if let Some(s) = self.server {
            t += &format!("server = {}\n", quoted(s));
        }
        if self.profile {
            t += "profile = true\n";
        }
        let (parts, own): (Vec<_>, Vec<_>) =
            (self.settings.iter()).partition(|(f, _)| *f == Field::Part);
        t += "\n[base]\n";
        for (f, v) in own {
            t += &format!("{} = {}\n", f.key(), quoted(v));
        }
        for (_, part) in parts {
            // NAME=WORKLOAD[:KEY=VALUE]..., as a [[part]] block reads back.
            let (name, rest) = part.split_once('=').unwrap_or((part, ""));
            let mut items = rest.split(':');
            t += &format!("\n[[part]]\nname = {}\n", quoted(name));
            t += &format!("workload = {}\n", quoted(items.next().unwrap_or("")));
            for kv in items {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                t += &format!("{} = {}\n", quoted(k), quoted(v));
            }
        }
        if !self.knobs.is_empty() || !self.server_knobs.is_empty() {
            t += "\n[[variant]]\nname = \"run\"\n";
            for (table, knobs) in [("knobs", self.knobs), ("server_knobs", self.server_knobs)] {
                if knobs.is_empty() {
                    continue;
                }
                let each: Vec<String> = (knobs.iter())
                    .map(|(k, v)| format!("{} = {}", quoted(k), quoted(v)))
                    .collect();
                t += &format!("{table} = {{ {} }}\n", each.join(", "));
            }
        }
        t
    }
}

/// `s` as a TOML basic string.
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => q.push_str(&format!("\\u{:04X}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BufSize, Topology, Veth};

    const FILE: &str = r#"
name = "s1"
label = "small-buffers"
iterations = "2..4"
order = "interleaved"
seed = 7

[base]
workload = "stream"
direction = "recv"
msg_size = 256
flows = 32
nodelay = true
duration = "5s"

[matrix]
sndbuf = ["8K", "16K", "auto"]
flows = [1, 32]

[[variant]]
name = "plain"

[[variant]]
name = "rps"
knobs = { "rps:lo" = "3", "sysctl:net.core.rmem_max" = 8388608 }
set = { client_cpus = "0" }

[quick]
iterations = 1
base = { duration = "1s" }
matrix = { sndbuf = ["8K", "auto"] }
"#;

    #[test]
    fn parses_a_full_file_and_expands_the_matrix() {
        let e = Experiment::parse(FILE).unwrap();
        assert_eq!(e.name, "s1");
        assert_eq!(e.order, Order::Interleaved);
        assert_eq!(e.seed, Some(7));
        assert_eq!(e.iterations, (2, 4));
        assert_eq!(e.axes.len(), 2);
        assert_eq!(e.axes[0].key, "sndbuf", "axes keep file order");
        let points = e.points().unwrap();
        assert_eq!(points.len(), 3 * 2 * 2);
        assert_eq!(points[0].id.to_string(), "sndbuf=8K,flows=1,variant=plain");
        assert_eq!(points[1].id.variant.as_deref(), Some("rps"));
        assert_eq!(
            points[1].spec.client_cpus.as_ref().unwrap().to_string(),
            "0"
        );
        assert_eq!(points[0].spec.socket.sndbuf, BufSize::Bytes(8192));
        assert_eq!(points[0].spec.flows, 1);
        assert_eq!(points[2].spec.flows, 32);
        assert!(points[0].spec.socket.nodelay);
        assert_eq!(points[0].spec.msg_size, 256);
        assert_eq!(e.variants[1].knobs[1].value, "8388608");
        let q = e.quick_profile();
        assert_eq!(q.iterations, (1, 1));
        let qp = q.points().unwrap();
        assert_eq!(qp.len(), 2 * 2 * 2);
        assert_eq!(qp[0].spec.duration_ms, 1000);
    }

    #[test]
    fn rr_writes_resolve_against_each_size_and_veth_fields_apply() {
        let e = Experiment::parse(
            r#"
name = "s5"
[base]
workload = "rr"
req_writes = "8,rest"
topology = "veth"
mtu = 1500
[matrix]
req_size = [100, 1448]
nodelay = [false, true]
"#,
        )
        .unwrap();
        let e2 = Experiment::parse(
            "name = \"p\"\n[base]\nworkload = \"rr\"\nresp_header = 8\n[matrix]\nresp_payload = [1447, 1448]\n",
        )
        .unwrap();
        let p2 = e2.points().unwrap();
        let rr = p2[1].spec.rr.as_ref().unwrap();
        assert_eq!(
            (rr.resp_size, rr.resp_writes.clone()),
            (1456, vec![8, 1448])
        );
        assert_eq!(p2[1].id.to_string(), "resp_payload=1448");
        let p = e.points().unwrap();
        assert_eq!(p[0].spec.rr.as_ref().unwrap().req_writes, vec![8, 92]);
        assert_eq!(p[2].spec.rr.as_ref().unwrap().req_writes, vec![8, 1440]);
        assert_eq!(
            p[0].spec.topology,
            Some(Topology::Veth(Veth {
                mtu: Some(1500),
                ..Veth::default()
            }))
        );
    }

    #[test]
    fn part_blocks_make_a_run_of_parts_and_their_errors_name_the_line() {
        let e = Experiment::parse(
            "name = \"p\"\n[base]\nworkload = \"rr\"\nduration = \"5s\"\n\
             [[part]]\nname = \"load\"\nworkload = \"stream\"\nflows = 2\nstart = \"2s\"\n\
             [[part]]\nname = \"up\"\nworkload = \"stream\"\ndirection = \"recv\"\n",
        )
        .unwrap();
        let s = &e.points().unwrap()[0].spec;
        assert_eq!(s.parts.len(), 2);
        assert_eq!((s.parts[0].spec.flows, s.parts[0].start_ms), (2, 2000));
        assert_eq!(s.parts[1].spec.direction, crate::Direction::Recv);
        assert_eq!(s.part_spec(&s.parts[1]).duration_ms, 5000);
        let bad = Experiment::parse(
            "name = \"p\"\n[base]\nworkload = \"rr\"\n[[part]]\nname = \"x\"\n\
             workload = \"stream\"\nduration = \"1s\"\n",
        )
        .and_then(|e| e.points().map(|_| ()))
        .unwrap_err();
        assert_eq!(bad.line, 4, "{bad:?}");
        assert!(bad.message.contains("the run's"), "{bad:?}");
    }

    /// `workload = "load"` is `plumb run load`: the same run of parts, with
    /// `phase` and `load_flows` as its flags, sweepable, and its keys
    /// refused elsewhere with their line.
    #[test]
    fn a_load_point_is_plumb_run_loads_run_of_parts() {
        let e = Experiment::parse(
            "name = \"l\"\n[base]\nworkload = \"load\"\nphase = \"2s\"\ncc = \"cubic\"\n\
             [matrix]\nload_flows = [1, 3]\n",
        )
        .unwrap();
        let points = e.points().unwrap();
        let mut cli = crate::load::settings(2, 3, ":cc=cubic");
        cli.push((Field::Cc, "cubic".into()));
        let fields: Vec<(Field, &str)> = cli.iter().map(|(f, v)| (*f, v.as_str())).collect();
        let same = crate::build(&fields, Names::Flags).unwrap();
        assert_eq!(points[1].spec, same, "the file's point is the command's");
        assert_eq!(points[0].spec.parts.last().unwrap().spec.flows, 1);
        assert_eq!(points[1].spec.duration_ms, 10_000);
        for (file, line, key, words) in [
            (
                "[base]\nworkload = \"rr\"\nphase = \"2s\"\n",
                4,
                "phase",
                "of workload \"load\"",
            ),
            (
                "[base]\nworkload = \"load\"\nphase = \"1500ms\"\n",
                4,
                "phase",
                "whole seconds",
            ),
            (
                "[base]\nworkload = \"load\"\nload_flows = 0\n",
                4,
                "load_flows",
                "1 to 1024",
            ),
            (
                "[base]\nworkload = \"load\"\nduration = \"9s\"\n",
                4,
                "duration",
                "set phase",
            ),
            (
                "[base]\nworkload = \"rr\"\ndirection = \"recv\"\nduration = \"1s\"\n",
                4,
                "direction",
                "no direction",
            ),
        ] {
            let bad = Experiment::parse(&format!("name = \"l\"\n{file}"))
                .and_then(|e| e.points().map(|_| ()))
                .unwrap_err();
            assert_eq!((bad.line, bad.key.as_str()), (line, key), "{bad:?}");
            assert!(bad.message.contains(words), "{bad:?}");
        }
    }

    #[test]
    fn a_run_file_reads_back_as_the_run_it_was_written_from() {
        let settings: Vec<(Field, String)> = [
            (Field::Workload, "rr"),
            (Field::Flows, "4"),
            (Field::ReqSize, "1K"),
            (Field::Duration, "2s"),
            (Field::Part, "load=stream:flows=2:direction=both:start=1s"),
            (Field::Part, "bulk=udp-stream:flows=1"),
        ]
        .iter()
        .map(|(f, v)| (*f, v.to_string()))
        .collect();
        let knobs = [(
            "sysctl:net.core.rmem_max".to_string(),
            "8388608".to_string(),
        )];
        let qdisc = [(
            "qdisc:lo".to_string(),
            "tbf rate 1gbit \"x\\y\"".to_string(),
        )];
        let run = RunFile {
            settings: &settings,
            iterations: (2, 7),
            confidence: (0.95, 0.025),
            label: Some("one-run@x:1"),
            server: Some("198.18.0.2:9000"),
            profile: true,
            knobs: &knobs,
            server_knobs: &qdisc,
        };
        let text = run.text();
        let e = Experiment::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let pairs: Vec<(Field, &str)> = settings.iter().map(|(f, v)| (*f, v.as_str())).collect();
        let spec = crate::build(&pairs, Names::Flags).unwrap();
        let points = e.points().unwrap();
        assert_eq!(points.len(), 1, "{text}");
        assert_eq!(points[0].spec, spec, "{text}");
        assert_eq!(points[0].spec.parts.len(), 2);
        assert_eq!(e.iterations, (2, 7));
        assert!((e.confidence.0 - 0.95).abs() < 1e-12 && (e.confidence.1 - 0.025).abs() < 1e-12);
        assert_eq!(
            (e.label.as_deref(), e.server.as_deref(), e.profile),
            (Some("one-run@x:1"), Some("198.18.0.2:9000"), true)
        );
        let v = &e.variants[0];
        let kv = |l: &[Located]| -> Vec<(String, String)> {
            l.iter().map(|l| (l.key.clone(), l.value.clone())).collect()
        };
        assert_eq!(
            (kv(&v.knobs), kv(&v.server_knobs)),
            (knobs.to_vec(), qdisc.to_vec())
        );
        // No knobs: no variant.
        let plain = RunFile {
            knobs: &[],
            server_knobs: &[],
            ..run
        };
        assert!(Experiment::parse(&plain.text())
            .unwrap()
            .variants
            .is_empty());
    }

    #[test]
    fn fields_take_the_units_and_defaults_of_plumb_run() {
        let e = Experiment::parse(
            "name = \"u\"\n[base]\nmsg_size = \"64kb\"\npacing_rate = \"10Gbps\"\n\
             zerocopy = \"msg\"\nrx = \"skip\"\nduration = \"2sec\"\nflows = \"2k\"\n",
        )
        .unwrap();
        let s = &e.points().unwrap()[0].spec;
        assert_eq!(s.msg_size, 64 << 10);
        assert_eq!(s.socket.pacing_rate_bps, Some(10_000_000_000));
        assert_eq!(
            (s.zerocopy, s.rx),
            (crate::ZeroCopy::Msg, crate::RxMode::Skip)
        );
        assert_eq!((s.duration_ms, s.flows), (2000, 2000));
        assert_eq!(s.warmup_ms, Spec::stream().warmup_ms);
        let bad = Experiment::parse("name = \"u\"\n[base]\nsndbuf = \"-5\"\n").unwrap_err();
        assert_eq!((bad.line, bad.key.as_str()), (3, "sndbuf"));
        assert!(bad.message.contains("'-5'"), "{bad}");
        let veth = Experiment::parse("name = \"u\"\n[base]\ndelay = \"5ms\"\n").unwrap_err();
        assert!(veth.message.contains("topology veth"), "{veth}");
    }

    #[test]
    fn profile_is_the_experiments_and_a_variant_may_say_otherwise() {
        let e = Experiment::parse(
            "name = \"p\"\nprofile = true\n[[variant]]\nname = \"on\"\n\
             [[variant]]\nname = \"off\"\nprofile = false\n",
        )
        .unwrap();
        assert!(e.profile);
        assert_eq!(e.variants[0].profile, None);
        assert_eq!(e.variants[1].profile, Some(false));
        assert!(!Experiment::parse("name = \"q\"\n").unwrap().profile);
    }

    #[test]
    fn errors_point_at_the_line_and_key() {
        let cases = [
            (
                "name = \"x\"\n[matrix]\nsndbuf = [\"8K\", \"8Q\"]\n",
                3,
                "sndbuf",
            ),
            ("name = \"x\"\n[base]\nwarp = 1\n", 3, "base.warp"),
            ("name = \"x\"\n\norder = \"shuffled\"\n", 3, "order"),
            (
                "name = \"x\"\n[base]\nworkload = \"stream\"\nreq_size = 5\n",
                4,
                "req_size",
            ),
            ("name = \"x\"\n[base]\nmtu = 1500\n", 3, "mtu"),
            ("name = \"x\"\n[[variant]]\nknobs = {}\n", 2, "variant[0]"),
            ("name = \"x\"\nmatrix = 3\n", 2, "matrix"),
            ("name = \"x\"\nprofile = \"yes\"\n", 2, "profile"),
            (
                "name = \"x\"\n[[variant]]\nname = \"a\"\nprofile = 1\n",
                4,
                "variant[0].profile",
            ),
            ("name = \"x\"\n[base\n", 2, ""),
            ("[base]\nflows = 2\n", 1, "name"),
        ];
        for (text, line, key) in cases {
            let e = Experiment::parse(text).unwrap_err();
            assert_eq!((e.line, e.key.as_str()), (line, key), "{text}: {e}");
        }
    }

    #[test]
    fn the_label_key_keeps_to_the_label_rule() {
        let e = Experiment::parse("name = \"x\"\nlabel = \"my kernel\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "label"), "{e}");
        assert!(e.to_string().contains(crate::label::LABEL_RULE), "{e}");
        let exp = Experiment::parse("name = \"x\"\nlabel = \"6.6.0-rc1@1a2b3c4d\"\n").unwrap();
        assert_eq!(exp.label.as_deref(), Some("6.6.0-rc1@1a2b3c4d"));
    }
}
