//! The house rules of `DESIGN.md` that a reader can check from the source alone: which rooms
//! import which, and that no two files import each other in a circle.
//!
//! The test reads every file under `src/`, resolves the paths it uses (`crate::`, `super::`,
//! `self::`, and bare paths into a child module such as `remote::run`, in `use` trees and in
//! code alike) to the files of the modules they name, and checks the graph. Test-only code
//! (`tests.rs`, `*_tests.rs`, `testing.rs`, trailing `#[cfg(test)] mod tests { … }` blocks)
//! is left out: tests may reach anywhere. `cargo test --test house -- --nocapture` prints the
//! room-level graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its module path and the files it imports.
struct File {
    /// `["engine", "runner"]` for `src/engine/runner.rs`; empty for `src/lib.rs`.
    module: Vec<String>,
    /// The code without comments, string literals and test modules.
    code: String,
}

/// `src/` of this crate, or of another checkout named by `HOUSE_SRC` (to see what an older
/// tree broke).
fn src_dir() -> PathBuf {
    match std::env::var_os("HOUSE_SRC") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file holds only test code.
fn is_test_file(rel: &Path) -> bool {
    let name = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    name == "tests" || name == "testing" || name.ends_with("_tests")
}

/// The module path of a file relative to `src/`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Drops comments, string and char literals (so words in them are not read as paths) and
/// the inline test module (it sits at the end of a file).
fn strip(source: &str) -> String {
    let source = match source.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &source[..at],
        None => source,
    };
    let mut out = String::with_capacity(source.len());
    let b = source.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            // Raw strings (`r#"…"#`) are rare in code outside tests; a plain scan is enough.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(char::from(b[i]));
            i += 1;
        }
    }
    out
}

/// Every path a file names: `use` trees wherever they stand (top of the file, inside a
/// function or block, after attributes), groups expanded (`use super::{a, b::C}` gives
/// `super::a` and `super::b::C`), and paths in code that start with `crate`, `super`, `self`
/// or any other segment (`remote::run(…)` beside `mod remote;`); [`resolve`] keeps those that
/// name a module of this crate.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // `use` statements, wherever they stand, groups expanded.
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let start = from + at;
        from = start + 4;
        if start > 0 && (ident(bytes[start - 1]) || bytes[start - 1] == b':') {
            continue;
        }
        let end = code[from..].find(';').map_or(code.len(), |e| from + e);
        expand(&code[from..end], &mut Vec::new(), &mut out);
        from = end;
    }
    // Paths in code: `crate::a::b`, `super::x`, `remote::run`; each starts where a segment
    // does not follow `::` (a path's first segment).
    let mut from = 0;
    while let Some(at) = code[from..].find("::") {
        let sep = from + at;
        from = sep + 2;
        let mut start = sep;
        while start > 0 && ident(bytes[start - 1]) {
            start -= 1;
        }
        if start == sep || (start >= 2 && &code[start - 2..start] == "::") {
            continue;
        }
        let mut end = sep;
        while end < bytes.len() && (ident(bytes[end]) || bytes[end] == b':') {
            end += 1;
        }
        out.push(
            code[start..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        );
        from = end.max(from);
    }
    out
}

/// Expands one `use` tree into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let (head, group) = match tree.find('{') {
        Some(open) if tree.ends_with('}') => (&tree[..open], Some(&tree[open + 1..tree.len() - 1])),
        _ => (tree, None),
    };
    let depth = prefix.len();
    for seg in head.split("::").map(str::trim).filter(|s| !s.is_empty()) {
        let seg = seg.split(" as ").next().unwrap_or(seg).trim();
        prefix.push(seg.to_owned());
    }
    match group {
        None => out.push(prefix.clone()),
        Some(group) => {
            // Split the group at top-level commas.
            let mut level = 0;
            let mut start = 0;
            let g = group.as_bytes();
            for i in 0..=g.len() {
                let at_end = i == g.len();
                if !at_end && g[i] == b'{' {
                    level += 1;
                } else if !at_end && g[i] == b'}' {
                    level -= 1;
                } else if at_end || (g[i] == b',' && level == 0) {
                    let item = group[start..i].trim();
                    if !item.is_empty() {
                        expand(item, prefix, out);
                    }
                    start = i + 1;
                }
            }
        }
    }
    prefix.truncate(depth);
}

/// The module a path names, resolved against the file's module and cut to the longest prefix
/// that is a module with a file of its own. `None` for paths into other crates.
fn resolve(
    path: &[String],
    from: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut abs: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => {
            let mut m = from.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                m.pop();
                rest = &rest[1..];
            }
            m.extend(rest.iter().cloned());
            return longest(m, modules);
        }
        Some("self") => from.to_vec(),
        Some(first) => {
            // A child module used without `self::` (`use pool::Pool;` beside `mod pool;`).
            let mut child = from.to_vec();
            child.push(first.to_owned());
            if !modules.contains(&child) {
                return None;
            }
            from.to_vec()
        }
        None => return None,
    };
    let skip = usize::from(matches!(
        path.first().map(String::as_str),
        Some("crate" | "self")
    ));
    abs.extend(path[skip..].iter().cloned());
    longest(abs, modules)
}

fn longest(mut m: Vec<String>, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    while !m.is_empty() {
        if modules.contains(&m) {
            return Some(m);
        }
        m.pop();
    }
    None
}

/// The import graph of `src/` (test code left out): file module → modules it imports.
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = src_dir();
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut parsed = Vec::new();
    let mut modules = BTreeSet::new();
    for path in files {
        let rel = path.strip_prefix(&root).expect("under src").to_path_buf();
        if rel == Path::new("main.rs") {
            continue;
        }
        let module = module_of(&rel);
        modules.insert(module.clone());
        if is_test_file(&rel) {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("read source");
        parsed.push(File {
            module,
            code: strip(&source),
        });
    }
    let mut edges = BTreeMap::new();
    for file in &parsed {
        let mut to = BTreeSet::new();
        for p in paths(&file.code) {
            if let Some(target) = resolve(&p, &file.module, &modules)
                && target != file.module
            {
                to.insert(target);
            }
        }
        edges.insert(file.module.clone(), to);
    }
    edges
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_owned()
    } else {
        m.join("::")
    }
}

/// Modules of a room (its own module and everything below it).
fn in_room(m: &[String], room: &[&str]) -> bool {
    m.len() >= room.len() && m.iter().zip(room).all(|(a, b)| a == b)
}

/// Asserts that no non-test file of `rooms` (folders or files under `src/`) names any of
/// `words` in its code.
fn assert_rooms_avoid(rooms: &[&str], words: &[&str], why: &str) {
    for room in rooms {
        let path = src_dir().join(room);
        let mut files = Vec::new();
        if path.is_dir() {
            walk(&path, &mut files);
        } else if path.exists() {
            files.push(path);
        }
        for file in files {
            let rel = file.strip_prefix(src_dir()).unwrap();
            if is_test_file(rel) {
                continue;
            }
            let code = strip(&std::fs::read_to_string(&file).unwrap());
            for word in words {
                assert!(!code.contains(word), "{} uses {word}: {why}", rel.display());
            }
        }
    }
}

#[test]
fn engine_core_imports_no_transport() {
    assert_rooms_avoid(
        &["engine"],
        &["tonic", "etcd_client", "hyper", "axum"],
        "the engine core speaks no transport",
    );
}

#[test]
fn the_seam_passes_on_no_engine_item() {
    // The API reaches the engine only through the seam's calls; the types it sees are `jobs`'.
    assert_rooms_avoid(
        &["seam", "api", "actors"],
        &["pub use crate::engine"],
        "a room above the engine re-exports none of its items",
    );
}

#[test]
fn backup_formats_speak_no_transport() {
    assert_rooms_avoid(
        &["backup"],
        &["tonic", "etcd_client", "hyper", "axum", "tokio"],
        "the backup formats are read and written apart from any transport",
    );
}

#[test]
fn rooms_import_only_downwards() {
    let g = graph();
    // (room, rooms it must not import)
    let rules: &[(&[&str], &[&[&str]])] = &[
        // The replica's parts are wired by `app`, never the other way round.
        (&["replica"], &[&["app"], &["api"], &["cli"]]),
        // Backup formats know no transport and no storage: the routes (api) and the command
        // line use them, and they reach the jobs only as the seam's records.
        (
            &["backup"],
            &[
                &["api"],
                &["engine"],
                &["store"],
                &["replica"],
                &["delivery"],
                &["app"],
                &["cli"],
                &["config"],
            ],
        ),
        (
            &["delivery"],
            &[&["engine"], &["replica"], &["seam"], &["api"], &["actors"]],
        ),
        (
            &["actors"],
            &[
                &["engine"],
                &["replica"],
                &["store"],
                &["api"],
                &["app"],
                &["seam", "remote"],
            ],
        ),
        (
            &["seam"],
            &[&["engine", "runner"], &["replica"], &["actors"], &["api"]],
        ),
        (&["seam", "remote"], &[&["engine"], &["replica"]]),
        (
            &["engine"],
            &[
                &["replica"],
                &["api"],
                &["delivery"],
                &["app"],
                &["seam"],
                &["actors"],
            ],
        ),
        (
            &["store"],
            &[
                &["engine"],
                &["replica"],
                &["api"],
                &["delivery"],
                &["seam"],
            ],
        ),
        (
            &["schedule"],
            &[
                &["engine"],
                &["store"],
                &["api"],
                &["delivery"],
                &["replica"],
                &["seam"],
                &["trigger"],
                &["clock"],
            ],
        ),
        (
            &["trigger"],
            &[
                &["engine"],
                &["store"],
                &["api"],
                &["delivery"],
                &["replica"],
                &["seam"],
                &["clock"],
            ],
        ),
        (
            &["go"],
            &[
                &["engine"],
                &["store"],
                &["api"],
                &["delivery"],
                &["replica"],
                &["seam"],
                &["schedule"],
                &["trigger"],
            ],
        ),
        // The API speaks the seam and its vocabulary (`jobs`), never the engine's items,
        // not even re-exported: the seam re-exports `jobs`' types, not the engine's.
        (
            &["api"],
            &[&["engine"], &["replica"], &["store"], &["delivery"]],
        ),
        // What the API and a scheduler exchange: plain data and its rules, below every room
        // that passes it.
        (
            &["jobs"],
            &[
                &["engine"],
                &["replica"],
                &["api"],
                &["delivery"],
                &["seam"],
                &["actors"],
                &["app"],
                &["cli"],
                &["config"],
                &["observe"],
            ],
        ),
        // The command line and console: a client of the API (and, for offline preview, of
        // an in-memory engine); it never reaches into the store's files, the replicas or
        // the app channel. `config` names the `jobs` subcommand's arguments, so the arrow
        // points from config to cli and never back.
        (
            &["cli"],
            &[
                &["config"],
                &["replica"],
                &["delivery"],
                &["resiliency"],
                &["app"],
                &["store", "redb"],
                &["store", "wal"],
                &["store", "etcd"],
            ],
        ),
        // A leaf: how servers accept and bound connections, for whichever room serves.
        (
            &["serve"],
            &[
                &["engine"],
                &["store"],
                &["api"],
                &["delivery"],
                &["replica"],
                &["seam"],
                &["actors"],
                &["app"],
                &["config"],
                &["observe"],
            ],
        ),
        // A leaf: the rooms that record hold its handles; it knows only the trigger contract
        // (and the generated messages a trigger carries).
        (
            &["observe"],
            &[
                &["engine"],
                &["store"],
                &["api"],
                &["delivery"],
                &["replica"],
                &["seam"],
                &["actors"],
                &["app"],
                &["config"],
                &["resiliency"],
                &["schedule"],
            ],
        ),
    ];
    let mut broken = Vec::new();
    // Only the composition (app), the flags (config: the `jobs` subcommand's arguments) and
    // the command line itself know the command line.
    for (from, to) in &g {
        let allowed = [&["app"][..], &["config"], &["cli"], &["main"]];
        if allowed.iter().any(|r| in_room(from, r)) {
            continue;
        }
        for target in to {
            if in_room(target, &["cli"]) {
                broken.push(format!("{} imports {}", name(from), name(target)));
            }
        }
    }
    for (from, to) in &g {
        for (room, banned) in rules {
            if !in_room(from, room) {
                continue;
            }
            for target in to {
                if banned.iter().any(|b| in_room(target, b)) {
                    broken.push(format!("{} imports {}", name(from), name(target)));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the house's arrows:\n{}",
        broken.join("\n")
    );
}

#[test]
fn pure_rooms_do_no_io() {
    assert_rooms_avoid(
        &["schedule", "go", "trigger.rs", "trigger", "jobs"],
        &[
            "tokio",
            "std::fs",
            "std::net",
            "tonic",
            "hyper",
            "redb",
            "Utc::now",
            "SystemTime",
        ],
        "this room is pure",
    );
}

/// The circles of a graph (one per back edge a depth-first search finds), as `a -> b -> a`.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit<'a>(
        m: &'a String,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a String, u8>,
        stack: &mut Vec<&'a String>,
        circles: &mut Vec<String>,
    ) {
        state.insert(m, 1);
        stack.push(m);
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                0 => visit(next, edges, state, stack, circles),
                1 => {
                    let at = stack.iter().position(|s| *s == next).unwrap_or(0);
                    let names: Vec<&str> = stack[at..].iter().map(|s| s.as_str()).collect();
                    circles.push(format!("{} -> {next}", names.join(" -> ")));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m, 2);
    }
    let mut state = BTreeMap::new();
    let mut found = Vec::new();
    for m in edges.keys() {
        if !state.contains_key(m) {
            visit(m, edges, &mut state, &mut Vec::new(), &mut found);
        }
    }
    found
}

/// The room-level graph (first path segment of each module; `crate` for `lib.rs`).
fn rooms() -> BTreeMap<String, BTreeSet<String>> {
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph() {
        let room = from.first().cloned().unwrap_or_else(|| "crate".into());
        let entry = rooms.entry(room.clone()).or_default();
        for t in to {
            let target = t.first().cloned().unwrap_or_else(|| "crate".into());
            if target != room {
                entry.insert(target);
            }
        }
    }
    rooms
}

#[test]
fn no_circles_of_files() {
    // A file importing its own ancestor module (a child using its parent's types) is how Rust
    // modules work; circles are counted among the other edges.
    let edges: BTreeMap<String, BTreeSet<String>> = graph()
        .iter()
        .map(|(from, to)| {
            (
                name(from),
                to.iter()
                    .filter(|t| !in_room(from, &t.iter().map(String::as_str).collect::<Vec<_>>()))
                    .map(|t| name(t))
                    .collect(),
            )
        })
        .collect();
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "files importing each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_circles_of_rooms() {
    let found = circles(&rooms());
    assert!(
        found.is_empty(),
        "rooms importing each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn print_room_graph() {
    // The room-level picture (first path segment), for the README and reviews.
    let rooms = rooms();
    for (room, to) in &rooms {
        println!(
            "{room:10} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(rooms.contains_key("engine") && rooms.contains_key("trigger"));
}
