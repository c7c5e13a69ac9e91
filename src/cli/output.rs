//! Printing: aligned tables that can grow page by page, JSON and YAML of the server's bodies,
//! and times as people read them ("in 3m 12s").

use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

use super::{CliError, Output};

/// Where and how a command prints.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The format asked for.
    pub format: Output,
}

impl Printer {
    /// A printer in `format`.
    pub fn new(format: Output) -> Self {
        Printer { format }
    }

    /// Whether a table (plain or wide) is wanted.
    pub fn is_table(&self) -> bool {
        matches!(self.format, Output::Table | Output::Wide)
    }

    /// Whether the wide table is wanted.
    pub fn is_wide(&self) -> bool {
        self.format == Output::Wide
    }

    /// `value` as the JSON or YAML document asked for (callers print tables themselves).
    pub fn document(&self, value: &Value) -> Result<(), CliError> {
        let text = match self.format {
            Output::Yaml => yaml(value)?,
            _ => format!("{}\n", pretty(value)?),
        };
        print(&text)
    }

    /// A line of text for people (tables and messages).
    pub fn line(&self, text: &str) -> Result<(), CliError> {
        print(&format!("{text}\n"))
    }
}

/// Writes `text` to stdout at once (a closed pipe ends the command quietly).
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Indented JSON.
pub fn pretty(value: &Value) -> Result<String, CliError> {
    serde_json::to_string_pretty(value).map_err(|e| CliError::Other(format!("JSON: {e}")))
}

/// `value` as a YAML document.
pub fn yaml(value: &Value) -> Result<String, CliError> {
    let text = serde_saphyr::to_string(value).map_err(|e| CliError::Other(format!("YAML: {e}")))?;
    Ok(if text.ends_with('\n') {
        text
    } else {
        format!("{text}\n")
    })
}

/// A table column: its title, and whether only `-o wide` shows it.
pub type Column = (&'static str, bool);

/// A table printed as its rows arrive: the header goes out with the first batch, and each
/// column is as wide as the widest cell seen so far (a later, wider batch widens it from
/// there on rather than holding every row back).
#[derive(Debug)]
pub struct Table {
    /// Column titles.
    header: Vec<String>,
    /// Current column widths.
    widths: Vec<usize>,
    /// Whether the header went out.
    started: bool,
    /// Which cells of a row are shown (all when `None`).
    shown: Option<Vec<bool>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            widths: header.iter().map(|h| h.width()).collect(),
            started: false,
            shown: None,
        }
    }

    /// A table of `columns` whose rows hold a cell for every column: the wide ones are left
    /// out unless `wide`.
    pub fn of(columns: &[Column], wide: bool) -> Self {
        let titles: Vec<&str> = columns
            .iter()
            .filter(|(_, only_wide)| wide || !only_wide)
            .map(|(title, _)| *title)
            .collect();
        Table {
            shown: Some(
                columns
                    .iter()
                    .map(|(_, only_wide)| wide || !only_wide)
                    .collect(),
            ),
            ..Table::new(&titles)
        }
    }

    /// Prints `rows` (the header first, once).
    pub fn print(&mut self, rows: &[Vec<String>]) -> Result<(), CliError> {
        print(&self.render(rows))
    }

    /// The text [`Table::print`] writes.
    pub fn render(&mut self, rows: &[Vec<String>]) -> String {
        let rows: Vec<Vec<String>> = match &self.shown {
            None => rows.to_vec(),
            Some(shown) => rows
                .iter()
                .map(|row| {
                    row.iter()
                        .zip(shown)
                        .filter(|(_, show)| **show)
                        .map(|(cell, _)| cell.clone())
                        .collect()
                })
                .collect(),
        };
        for row in &rows {
            for (w, cell) in self.widths.iter_mut().zip(row) {
                *w = (*w).max(cell.width());
            }
        }
        let mut text = String::new();
        if !self.started {
            self.started = true;
            let header = self.header.clone();
            self.line(&header, &mut text);
        }
        for row in &rows {
            self.line(row, &mut text);
        }
        text
    }

    /// The header alone, when no row came (so an empty list still shows its columns).
    pub fn finish(&mut self) -> Result<(), CliError> {
        if self.started {
            return Ok(());
        }
        self.print(&[])
    }

    fn line(&self, cells: &[String], text: &mut String) {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(&self.widths).enumerate() {
            line.push_str(cell);
            if i + 1 < cells.len() {
                line.push_str(&" ".repeat(width - cell.width() + 2));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
}

/// A key-value block for one object (`get`): keys aligned, one per line.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.width()).max().unwrap_or(0);
    let mut text = String::new();
    for (key, value) in pairs {
        let pad = " ".repeat(width - key.width());
        text.push_str(format!("{key}:{pad}  {value}").trim_end());
        text.push('\n');
    }
    text
}

/// A string member of a JSON object, or `""`.
pub fn str_of<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A member of a JSON object as text: strings as they are, `null` or missing as `""`,
/// anything else as JSON.
pub fn text_of(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// An RFC 3339 member parsed, if present and valid.
pub fn time_of(value: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(str_of(value, pointer))
        .ok()
        .map(|t| t.to_utc())
}

/// A time as UTC RFC 3339 to the second (`2026-01-01T00:00:10Z`).
pub fn absolute(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `t` relative to `now`: `in 3m 12s`, `5s ago`, `now`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let delta = t - now;
    let secs = delta.num_milliseconds() as f64 / 1000.0;
    // Whole seconds, rounded towards "now" so a tick 9.6 s away reads "in 9s" as a countdown
    // would.
    let whole = secs.abs().floor() as i64;
    if whole == 0 {
        return "now".to_owned();
    }
    let span = span(whole);
    if secs > 0.0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// Seconds (at least 1) as their two largest units: `3m 12s`, `2h 5m`, `4d 3h`, `12s`; a
/// zero second unit is left out (`2h`).
fn span(secs: i64) -> String {
    const UNITS: [(i64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let first = UNITS
        .iter()
        .position(|(size, _)| secs >= *size)
        .unwrap_or(UNITS.len() - 1);
    let (size, unit) = UNITS[first];
    let mut text = format!("{}{unit}", secs / size);
    if let Some((smaller, unit)) = UNITS.get(first + 1) {
        let n = (secs % size) / smaller;
        if n > 0 {
            text.push_str(&format!(" {n}{unit}"));
        }
    }
    text
}

/// An optional time as "relative (absolute)" for `get`, or `-`.
pub fn when(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| format!("{} ({})", relative(t, now), absolute(t)),
    )
}

/// An optional time relative to `now`, or `-`.
pub fn relative_or_dash(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| relative(t, now))
}

/// An optional time in UTC, or `-`.
pub fn absolute_or_dash(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), absolute)
}

/// `value` or `-` when empty.
pub fn or_dash(value: String) -> String {
    if value.is_empty() {
        "-".to_owned()
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn times_read_as_people_say_them() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let at = |s: i64| relative(now + TimeDelta::seconds(s), now);
        assert_eq!(at(0), "now");
        assert_eq!(at(12), "in 12s");
        assert_eq!(at(192), "in 3m 12s");
        assert_eq!(at(-5), "5s ago");
        assert_eq!(at(7_200), "in 2h");
        assert_eq!(at(7_500), "in 2h 5m");
        assert_eq!(at(86_400 * 4 + 3_600 * 3 + 59), "in 4d 3h");
        assert_eq!(at(3_601), "in 1h");
        assert_eq!(relative(now + TimeDelta::milliseconds(9_600), now), "in 9s");
    }

    #[test]
    fn tables_align_and_widen_page_by_page() {
        let mut t = Table::new(&["NAME", "STATE"]);
        let first = t.render(&[vec!["a".into(), "active".into()]]);
        assert_eq!(first, "NAME  STATE\na     active\n");
        let second = t.render(&[vec!["longer-name".into(), "paused".into()]]);
        assert_eq!(second, "longer-name  paused\n");
        let mut empty = Table::new(&["NAME", "STATE"]);
        assert_eq!(empty.render(&[]), "NAME  STATE\n");
        let columns = [("NAME", false), ("UTC", true), ("STATE", false)];
        let row = vec!["a".to_owned(), "2026".to_owned(), "paused".to_owned()];
        assert_eq!(
            Table::of(&columns, false).render(std::slice::from_ref(&row)),
            "NAME  STATE\na     paused\n"
        );
        assert_eq!(
            Table::of(&columns, true).render(&[row]),
            "NAME  UTC   STATE\na     2026  paused\n"
        );
    }

    #[test]
    fn yaml_of_a_body() {
        let v = serde_json::json!({"name": "a", "labels": {"team": "x"}, "n": 3});
        let text = yaml(&v).unwrap();
        assert!(text.contains("name: a"), "{text}");
        assert!(text.contains("team: x"), "{text}");
    }
}
