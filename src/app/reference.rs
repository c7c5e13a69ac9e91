//! The reference pages generated from the code, so that they cannot drift from it:
//! `docs/reference/flags.md` from the clap command line ([`flags`]) and
//! `docs/reference/metrics.md` from the metrics registries of each role ([`metrics`]).
//!
//! `tests/reference.rs` renders both and fails when the committed files differ;
//! `JOBSD_BLESS=1 cargo test --test reference` rewrites them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory};

use crate::config::Cli;
use crate::observe::{Format, Metrics};

/// The first line of every generated page: where it comes from and how to renew it.
const GENERATED: &str =
    "<!-- Generated from the code by `JOBSD_BLESS=1 cargo test --test reference`; do not edit. -->";

/// `docs/reference/flags.md`: every command of `jobsd` (the sidecar, `scheduler`, `jobs …`)
/// with each of its flags and arguments, grouped by their `--help` heading.
pub fn flags() -> String {
    let mut out = format!(
        "{GENERATED}\n\n# Flags\n\nEvery flag and argument of every `jobsd` command, as `--help` \
         shows them: value, default and environment variable. Flags take daprd's syntax too \
         (`--flag=value`, single-dash `-flag`, bools as `--flag` or `--flag=false`; a repeated \
         flag keeps its last value). What the flags do, role by role: \
         [sidecar.md](../sidecar.md), [scheduler-cluster.md](../scheduler-cluster.md), \
         [cli.md](../cli.md).\n"
    );
    let mut root = Cli::command();
    root.build();
    command(&mut out, &root, "jobsd", &BTreeSet::new());
    out
}

/// Appends the section of `cmd` (called `path` on the command line), then its subcommands'.
/// `inherited` are the global flags of the commands above, shown where they are defined.
fn command(out: &mut String, cmd: &Command, path: &str, inherited: &BTreeSet<String>) {
    let _ = writeln!(out, "\n## `{path}`");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "\n{}", one_line(&about.to_string()));
    }
    if !inherited.is_empty() {
        let parent = path.rsplit_once(' ').map_or(path, |(p, _)| p);
        let _ = writeln!(out, "\nAlso takes the options of `{parent}`.");
    }
    let mut groups: Vec<(Option<&str>, Vec<&Arg>)> = Vec::new();
    let own = cmd
        .get_arguments()
        .filter(|a| !is_builtin(a) && !inherited.contains(a.get_id().as_str()));
    for arg in own {
        let heading = arg.get_help_heading();
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, args)) => args.push(arg),
            None => groups.push((heading, vec![arg])),
        }
    }
    for (heading, args) in groups {
        out.push('\n');
        if let Some(heading) = heading {
            let _ = write!(out, "{heading}:\n\n");
        }
        out.push_str("| flag | value | default | env | what |\n|---|---|---|---|---|\n");
        for arg in args {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                cell(&flag_name(arg)),
                cell(&value(arg)),
                cell(&defaults(arg)),
                arg.get_env()
                    .map(|e| format!("`{}`", e.to_string_lossy()))
                    .unwrap_or_default(),
                cell(&help(arg)),
            );
        }
    }
    let mut globals = inherited.clone();
    globals.extend(
        cmd.get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string()),
    );
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        command(out, sub, &format!("{path} {}", sub.get_name()), &globals);
    }
}

/// clap's own `--help` and `--version`.
fn is_builtin(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

/// `--app-id`, `-o, --output`, or `<NAME>` for a positional argument.
fn flag_name(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!("`<{}>`", arg.get_id().as_str().to_uppercase()),
    }
}

/// What the flag takes: its choices, its value name, or `bool` for a switch.
fn value(arg: &Arg) -> String {
    if !arg.get_action().takes_values() || matches!(arg.get_action(), ArgAction::SetTrue) {
        return "bool".into();
    }
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| p.get_name().to_owned())
        .collect();
    if !choices.is_empty() && choices != ["true", "false"] {
        return format!("`{}`", choices.join("` | `"));
    }
    if choices == ["true", "false"] {
        return "bool".into();
    }
    let name = match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        None => arg.get_id().as_str().to_uppercase(),
    };
    let many = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_value_delimiter().is_some()
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    if many {
        format!("`{name}`…")
    } else {
        format!("`{name}`")
    }
}

/// The default value(s), as `--help` shows them.
fn defaults(arg: &Arg) -> String {
    let values: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if values.is_empty() || values.iter().all(String::is_empty) {
        String::new()
    } else {
        format!("`{}`", values.join(","))
    }
}

/// The flag's doc comment, on one line.
fn help(arg: &Arg) -> String {
    arg.get_long_help()
        .or(arg.get_help())
        .map(|h| one_line(&h.to_string()))
        .unwrap_or_default()
}

/// Text with its line breaks and runs of spaces folded into single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: `|` escaped so it does not end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// One metric family as a scrape shows it.
#[derive(Default)]
struct Family {
    /// `counter`, `gauge`, `histogram`, `unknown` (daprd's untyped counts).
    kind: String,
    /// The `# HELP` text.
    help: String,
    /// The roles that serve it, in order, with the label names seen on its samples there
    /// (`le` left out).
    roles: Vec<(&'static str, BTreeSet<String>)>,
}

/// `docs/reference/metrics.md`: every metric family each role registers, read from a scrape
/// of a freshly started role's registry: name, type, labels, roles, help.
pub fn metrics() -> String {
    let replica = Metrics::replica(true);
    // Placement's families have a series per namespace that connects.
    replica.placement().set_runtimes("<namespace>", 0, 0);
    // The concurrency families have a series per limit a daprd names; one gated trigger
    // shows them.
    let gate = replica.scheduler();
    gate.gate_inflight("<key>", 0);
    gate.gate_pending("<key>", 0);
    gate.gate_throttled("<key>");
    let roles = [
        (
            "sidecar (embedded)",
            Metrics::sidecar("myapp", "default", true),
        ),
        (
            "sidecar (remote)",
            Metrics::sidecar("myapp", "default", false),
        ),
        ("`jobsd scheduler`", replica),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for (role, registry) in roles {
        let text = runtime
            .block_on(registry.render(Format::Prometheus))
            .unwrap_or_default();
        read_scrape(&text, role, &mut families);
    }
    let mut out = format!(
        "{GENERATED}\n\n# Metrics\n\nEvery metric family, by the role that serves it on \
         `GET /metrics` (`--metrics-port`, 9090): a sidecar on its embedded scheduler, a sidecar \
         in remote mode (`--scheduler-host-address`), a `jobsd scheduler` replica. Labels are \
         those each role shows once started (the replica's concurrency families after one \
         trigger under a limit a daprd named). What they mean and how they are scraped: \
         [observability.md](../observability.md#metrics).\n\n\
         | name | type | labels | roles | help |\n|---|---|---|---|---|\n"
    );
    for (name, f) in &families {
        let list = |set: &BTreeSet<String>| {
            let names: Vec<String> = set.iter().map(|l| format!("`{l}`")).collect();
            names.join(", ")
        };
        let same = f.roles.windows(2).all(|w| w[0].1 == w[1].1);
        let labels = match f.roles.first() {
            Some((_, set)) if same => list(set),
            _ => f
                .roles
                .iter()
                .map(|(role, set)| format!("{role}: {}", list(set)))
                .collect::<Vec<_>>()
                .join("; "),
        };
        let roles: Vec<&str> = f.roles.iter().map(|(role, _)| *role).collect();
        let _ = writeln!(
            out,
            "| `{name}` | {} | {labels} | {} | {} |",
            f.kind,
            roles.join(", "),
            cell(&f.help),
        );
    }
    out
}

/// Adds the families of one role's scrape (Prometheus text format) to `families`.
fn read_scrape(text: &str, role: &'static str, families: &mut BTreeMap<String, Family>) {
    let mut seen: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let f = families.entry(name.to_owned()).or_default();
            f.help = help.to_owned();
            f.roles.push((role, BTreeSet::new()));
            seen.push(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().kind = kind.to_owned();
        } else if !line.starts_with('#') && !line.is_empty() {
            let sample = line.split(['{', ' ']).next().unwrap_or("");
            // The longest family name this sample belongs to (`…_bucket`, `…_sum` of a
            // histogram, or the family itself).
            let Some(family) = seen
                .iter()
                .filter(|n| sample.starts_with(n.as_str()))
                .max_by_key(|n| n.len())
            else {
                continue;
            };
            let f = families.entry(family.clone()).or_default();
            if let Some((_, labels)) = f.roles.last_mut() {
                labels.extend(label_names(line).into_iter().filter(|l| l != "le"));
            }
        }
    }
}

/// The label names of one sample line: `a="x",b="y\"z"` gives `a`, `b`.
fn label_names(line: &str) -> Vec<String> {
    let Some(start) = line.find('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut chars = line[start + 1..].chars();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '}' => break,
            '=' => {
                names.push(std::mem::take(&mut name));
                // Skip the quoted value, escapes included.
                chars.next();
                while let Some(v) = chars.next() {
                    match v {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            ',' | ' ' => {}
            c => name.push(c),
        }
    }
    names
}
