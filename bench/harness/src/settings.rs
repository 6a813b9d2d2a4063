//! The report's settings tables: each contender's settings as its driver reported them.

use serde_json::Value;
use std::fmt::Write as _;

/// A setting's value in a table cell.
fn cell(value: &Value) -> String {
    let text = match value {
        Value::Null => "none".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.replace('|', "\\|")
}

/// A driver's settings flattened to `name` (or `outer.inner`) and value, in the driver's order.
fn flatten(prefix: &str, value: &Value, into: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (name, inner) in map {
                let name = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                flatten(&name, inner, into);
            }
        }
        other => into.push((prefix.to_owned(), other.clone())),
    }
}

/// A driver's settings, flattened (`None` for a contender that failed every run).
type Flat = Option<Vec<(String, Value)>>;

/// Settings per table, at most, besides the contender's name.
const SETTINGS_PER_TABLE: usize = 6;

/// The contenders' settings as reported by their drivers (`None` for a contender that failed every
/// run): the settings every contender reports alike in one line, the others as tables with
/// one column per setting and a dash where a contender has no such setting.
pub fn settings_tables(md: &mut String, contenders: &[(&str, Option<&Value>)]) {
    let rows: Vec<(&str, Flat)> = contenders
        .iter()
        .map(|(name, settings)| {
            let settings = settings.map(|settings| {
                let mut flat = Vec::new();
                flatten("", settings, &mut flat);
                flat
            });
            (*name, settings)
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (_, settings) in &rows {
        for (name, _) in settings.iter().flatten() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    let value = |settings: &Flat, name: &str| {
        settings
            .as_ref()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let reported: Vec<_> = rows.iter().filter(|(_, s)| s.is_some()).collect();
    let (common, varying): (Vec<String>, Vec<String>) = names.into_iter().partition(|name| {
        let first = reported.first().and_then(|(_, s)| value(s, name));
        first.is_some() && reported.iter().all(|(_, s)| value(s, name) == first)
    });
    if !common.is_empty() {
        let _ = write!(md, "The same for every contender:");
        for (i, name) in common.iter().enumerate() {
            let v = reported
                .first()
                .and_then(|(_, s)| value(s, name))
                .unwrap_or(Value::Null);
            let _ = write!(
                md,
                "{} `{name}` {}",
                if i == 0 { "" } else { ";" },
                cell(&v)
            );
        }
        let _ = writeln!(md, ".\n");
    }
    let _ = writeln!(
        md,
        "The others, as each driver reported them; – where a contender has no such setting.\n"
    );
    for chunk in varying.chunks(SETTINGS_PER_TABLE) {
        let _ = write!(md, "| contender |");
        for name in chunk {
            let _ = write!(md, " {name} |");
        }
        let _ = write!(md, "\n|---|");
        for _ in chunk {
            let _ = write!(md, "---|");
        }
        let _ = writeln!(md);
        for (contender, settings) in &rows {
            let _ = write!(md, "| {contender} |");
            for name in chunk {
                let _ = match (settings, value(settings, name)) {
                    (None, _) => write!(md, " (failed) |"),
                    (Some(_), None) => write!(md, " – |"),
                    (Some(_), Some(v)) => write!(md, " {} |", cell(&v)),
                };
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_are_columns_with_a_dash_where_they_do_not_apply() {
        let a = json!({"lease_ms": 2000, "backoff": {"max_ms": 40}, "note": "x|y"});
        let b = json!({"lease_ms": 2000, "mode": null});
        let mut md = String::new();
        settings_tables(&mut md, &[("a", Some(&a)), ("b", Some(&b)), ("c", None)]);
        assert!(
            md.contains("The same for every contender: `lease_ms` 2000."),
            "{md}"
        );
        assert!(
            md.contains("| contender | backoff.max_ms | note | mode |"),
            "{md}"
        );
        assert!(md.contains("| a | 40 | x\\|y | – |"), "{md}");
        assert!(md.contains("| b | – | – | none |"), "{md}");
        assert!(
            md.contains("| c | (failed) | (failed) | (failed) |"),
            "{md}"
        );
    }
}
