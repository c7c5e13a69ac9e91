//! `jobsd jobs limits`: the app's concurrency rules by key (`policy.concurrencyKey`) and the
//! keys out and waiting now, through the sidecar's `/jobsd/v1/concurrency` routes.

use clap::{Args, Subcommand};
use http::Method;
use serde_json::{Value, json};

use super::client::{Client, escape};
use super::error::CliError;
use super::output::{Printer, Table, text_of};

/// `jobsd jobs limits …`.
#[derive(Debug, Clone, Args)]
pub struct LimitsArgs {
    /// What to do (default: list).
    #[command(subcommand)]
    pub command: Option<LimitsCommand>,
}

/// The `limits` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum LimitsCommand {
    /// The rules, and the keys with executions out or waiting (the default).
    List,
    /// Set the limit of a key, or of every key with a prefix (`tenant-*`, each key on its own).
    Set {
        /// A concurrency key, or a prefix followed by `*`.
        key: String,
        /// Executions of the key out at once (1 or more).
        limit: u32,
    },
    /// Delete the rule of a key or prefix.
    Delete {
        /// The key or prefix, as it was set.
        key: String,
    },
}

fn path(key: &str) -> String {
    format!("/jobsd/v1/concurrency/{}", escape(key))
}

/// Runs `jobsd jobs limits`.
pub async fn run(client: &Client, args: &LimitsArgs, out: &Printer) -> Result<(), CliError> {
    match args.command.clone().unwrap_or(LimitsCommand::List) {
        LimitsCommand::List => list(client, out).await,
        LimitsCommand::Set { key, limit } => {
            let body = json!({ "limit": limit });
            let answer = client
                .call(Method::PUT, &path(&key), Some(&body))
                .await?
                .json()?;
            if !out.is_table() {
                return out.document(&answer);
            }
            out.line(&format!("concurrency limit of {key}: {limit}"))
        }
        LimitsCommand::Delete { key } => {
            client.call(Method::DELETE, &path(&key), None).await?;
            if !out.is_table() {
                return out.document(&json!({ "deleted": key }));
            }
            out.line(&format!("deleted the concurrency rule of {key}"))
        }
    }
}

async fn list(client: &Client, out: &Printer) -> Result<(), CliError> {
    let view = client.get("/jobsd/v1/concurrency").await?;
    if !out.is_table() {
        return out.document(&view);
    }
    let rows = |pointer: &str| view.pointer(pointer).and_then(Value::as_array).cloned();
    let mut rules = Table::new(&["RULE", "LIMIT"]);
    let rule_rows: Vec<Vec<String>> = rows("/rules")
        .unwrap_or_default()
        .iter()
        .map(|r| vec![text_of(r, "/key"), text_of(r, "/limit")])
        .collect();
    rules.print(&rule_rows)?;
    rules.finish()?;
    out.line("")?;
    let mut keys = Table::new(&["KEY", "RULE", "LIMIT", "IN FLIGHT", "WAITING"]);
    let key_rows: Vec<Vec<String>> = rows("/keys")
        .unwrap_or_default()
        .iter()
        .map(|k| {
            let or_none = |p: &str| match text_of(k, p) {
                t if t.is_empty() => "-".to_owned(),
                t => t,
            };
            vec![
                text_of(k, "/key"),
                or_none("/rule"),
                or_none("/limit"),
                text_of(k, "/inFlight"),
                text_of(k, "/waiting"),
            ]
        })
        .collect();
    keys.print(&key_rows)?;
    keys.finish()
}
