//! What the commands print: JSON (the Lambda function's answer shapes) with `--json`, else text
//! for people, rendered from the same answers.

use ddb_lock_lambda::response::{ListResponse, StatusResponse};
use serde::Serialize;

/// Prints `answer` as one line of JSON.
pub fn json(answer: &impl Serialize) {
    match serde_json::to_string(answer) {
        Ok(line) => println!("{line}"),
        // Our answers are plain structs of strings and numbers: nothing to fail on.
        Err(err) => eprintln!("ddb-lock: cannot print the answer as JSON: {err}"),
    }
}

/// A lock's status, field by field.
pub fn status(answer: &StatusResponse) {
    let mut rows: Vec<(&str, String)> = vec![("resource", answer.resource.clone())];
    if !answer.locked {
        rows.push(("state", "free".into()));
    } else if let Some(holders) = &answer.holders {
        rows.push(("state", format!("shared by {}", holders.len())));
        for holder in holders {
            rows.push((
                "holder",
                format!("{} until {}", holder.owner, holder.expires_at),
            ));
        }
        for intent in answer.intents.iter().flatten() {
            rows.push((
                "below",
                format!("{} until {}", intent.owner, intent.expires_at),
            ));
        }
        if let Some(writer) = &answer.writer_waiting {
            rows.push(("writer waiting", writer.clone()));
        }
    } else {
        rows.push(("state", "held".into()));
        let field = |value: &Option<String>| value.clone().unwrap_or_default();
        rows.push(("owner", field(&answer.owner)));
        rows.push(("acquired at", field(&answer.acquired_at)));
        let remaining = answer
            .remaining_ms
            .map(|ms| format!(" ({} left)", seconds(ms)))
            .unwrap_or_default();
        rows.push((
            "expires at",
            format!("{}{remaining}", field(&answer.expires_at)),
        ));
        if let Some(token) = answer.fencing_token {
            rows.push(("fencing token", token.to_string()));
        }
        if let Some(data) = &answer.data {
            rows.push(("data", data.to_string()));
        }
    }
    for (place, waiter) in answer.queue.iter().flatten().enumerate() {
        let until = waiter
            .until
            .as_ref()
            .map(|until| format!(", waits until {until}"))
            .unwrap_or_default();
        rows.push((
            "in line",
            format!(
                "{}. {} (joined {}{until})",
                place + 1,
                waiter.owner,
                waiter.joined_at
            ),
        ));
    }
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        println!("{name:<width$}  {value}");
    }
}

/// A namespace's live locks, one row each.
pub fn list(answer: &ListResponse) {
    let mut rows = vec![[
        "RESOURCE".to_owned(),
        "MODE".to_owned(),
        "HOLDERS".to_owned(),
        "EXPIRES AT".to_owned(),
    ]];
    for lock in &answer.locks {
        let (mode, holders, expires) = match &lock.holders {
            Some(holders) => (
                "shared",
                holders
                    .iter()
                    .map(|h| h.owner.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                holders
                    .iter()
                    .map(|h| h.expires_at.as_str())
                    .max()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => (
                "exclusive",
                lock.owner.clone().unwrap_or_default(),
                lock.expires_at.clone().unwrap_or_default(),
            ),
        };
        rows.push([lock.resource.clone(), mode.to_owned(), holders, expires]);
    }
    table(&rows);
    println!(
        "{} live lock{} in namespace {}",
        answer.locks.len(),
        if answer.locks.len() == 1 { "" } else { "s" },
        answer.namespace
    );
}

/// Rows in aligned columns.
fn table<const N: usize>(rows: &[[String; N]]) {
    let mut widths = [0; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

/// Milliseconds as seconds with one decimal.
pub fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}
