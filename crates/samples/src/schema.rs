//! The record's JSON Schema, generated from the record's types: the
//! committed `schemas/run.v1.schema.json` is this function's output, and a
//! test fails when the two differ (`PLUMB_WRITE_SCHEMA=1` rewrites it).
//!
//! What serde writes is what the schema describes: a field serde leaves out
//! when empty is optional, every other field required; an object takes no
//! key its type does not name; the bounds and patterns a type's values keep
//! are attributes beside its fields.

use crate::RunRecord;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::Schema;

/// Where the schema lives, as `$id` names it.
pub const RUN_SCHEMA_ID: &str = "https://plumb.invalid/schemas/run.v1.schema.json";

/// The schema of [`RunRecord`] as `plumb run --json` prints it and the
/// store keeps it.
pub fn run_schema() -> serde_json::Value {
    let mut settings = SchemaSettings::draft2020_12().for_serialize();
    settings
        .transforms
        .push(Box::new(RecursiveTransform(closed)));
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<RunRecord>();
    schema.insert("$id".into(), RUN_SCHEMA_ID.into());
    schema.insert(
        "description".into(),
        "The record of one run (`plumb run --json`, and what the store keeps): \
         the spec that ran and one entry per iteration."
            .into(),
    );
    schema.to_value()
}

/// What serde writes, exactly: an object takes no key its type does not
/// name, and a field serde leaves out when empty (the only fields not
/// required in a schema of what is written) is never null where present.
fn closed(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if !object.contains_key("properties") {
        return;
    }
    let required: Vec<serde_json::Value> = match object.get("required") {
        Some(serde_json::Value::Array(r)) => r.clone(),
        _ => Vec::new(),
    };
    if let Some(serde_json::Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(&name.as_str().into()) {
                never_null(property);
            }
        }
    }
    object.entry("additionalProperties").or_insert(false.into());
}

/// `property` without the null an `Option` adds to its schema.
fn never_null(property: &mut serde_json::Value) {
    use serde_json::Value;
    match property.get_mut("type") {
        Some(Value::Array(types)) => {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                let only = types.remove(0);
                property["type"] = only;
            }
        }
        _ => {
            if let Some(Value::Array(alternatives)) = property.get_mut("anyOf") {
                alternatives.retain(|a| a.get("type") != Some(&Value::from("null")));
                if alternatives.len() == 1 {
                    let only = alternatives.remove(0);
                    let object = property.as_object_mut().unwrap();
                    object.remove("anyOf");
                    if let Value::Object(only) = only {
                        object.extend(only);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure;
    use serde_json::Value;

    /// `node` with its reference followed and the null of an `Option`
    /// taken away.
    fn resolved<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
        if let Some(name) = node["$ref"]
            .as_str()
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            return resolved(root, &root["$defs"][name]);
        }
        match node["anyOf"].as_array() {
            Some(alternatives) => alternatives
                .iter()
                .find(|a| a["type"] != "null")
                .map_or(node, |a| resolved(root, a)),
            None => node,
        }
    }

    /// Where a record's `step` leads from `node`: a field of a struct, a
    /// key of a map, an entry of a list (`[]`).
    fn step<'a>(root: &'a Value, node: &'a Value, step: &str) -> Option<&'a Value> {
        let next = match step {
            "[]" => node.get("items")?,
            key => node["properties"]
                .get(key)
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
        };
        Some(resolved(root, next))
    }

    #[test]
    fn every_part_and_figure_the_probes_declare_is_where_the_types_put_it() {
        let root = run_schema();
        let end = resolved(&root, &root["$defs"]["EndResult"]);
        for (probe, part) in figure::parts() {
            let at = part.key.split('.').try_fold(end, |n, k| step(&root, n, k));
            let at = at.unwrap_or_else(|| {
                panic!(
                    "{}: {} is no part of an end's record",
                    probe.name(),
                    part.key
                )
            });
            for f in part.figures.iter().filter(|f| !f.path.is_empty()) {
                let leaf = figure::steps(f.path)
                    .into_iter()
                    .try_fold(at, |n, k| step(&root, n, k));
                let kind = leaf.and_then(|l| l["type"].as_str());
                assert!(
                    matches!(kind, Some("integer" | "number")),
                    "{}: {}.{} reaches no number in the record's types",
                    probe.name(),
                    part.key,
                    f.path
                );
            }
        }
    }

    #[test]
    fn the_committed_schema_is_the_one_the_types_make() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schemas/run.v1.schema.json"
        );
        let made = serde_json::to_string_pretty(&run_schema()).unwrap() + "\n";
        if std::env::var_os("PLUMB_WRITE_SCHEMA").is_some() {
            std::fs::write(path, &made).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap();
        assert!(
            committed == made,
            "schemas/run.v1.schema.json is not what the record's types make: \
             rerun with PLUMB_WRITE_SCHEMA=1 to write it, and read the diff"
        );
    }
}
