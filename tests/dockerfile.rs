//! The Dockerfile, checked by reading it (the development machines have no Docker engine):
//! what it copies exists and is in the build context, the build needs no `protoc`, the image
//! runs as a non-root user that owns `/data`, and the runtime stage carries no build tools.

use std::path::Path;

/// One `FROM` stage: its image, its `AS` name, and its instructions in order.
struct Stage {
    image: String,
    name: Option<String>,
    instructions: Vec<(String, String)>,
}

impl Stage {
    /// The arguments of every `instruction` of this stage.
    fn all(&self, instruction: &str) -> Vec<&str> {
        self.instructions
            .iter()
            .filter(|(i, _)| i == instruction)
            .map(|(_, args)| args.as_str())
            .collect()
    }

    /// The arguments of the last `instruction` of this stage (Docker uses the last).
    fn last(&self, instruction: &str) -> &str {
        self.all(instruction)
            .pop()
            .unwrap_or_else(|| panic!("no {instruction} in stage {:?}", self.image))
    }
}

/// A `COPY`: its `--from` and `--chown` flags, sources and destination.
struct Copy<'a> {
    from: Option<&'a str>,
    chown: Option<&'a str>,
    sources: Vec<&'a str>,
    dest: &'a str,
}

fn copy(args: &str) -> Copy<'_> {
    let mut words: Vec<&str> = args.split_whitespace().collect();
    let dest = words.pop().expect("COPY without a destination");
    let flag = |name: &str| {
        words
            .iter()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
    };
    let (from, chown) = (flag("--from"), flag("--chown"));
    let sources = words.into_iter().filter(|w| !w.starts_with("--")).collect();
    Copy {
        from,
        chown,
        sources,
        dest,
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Dockerfile's stages: comments dropped, `\` continuations joined.
fn stages() -> Vec<Stage> {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let mut logical = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && pending.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                logical.push(std::mem::take(&mut pending));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for line in logical {
        let (instruction, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let (instruction, args) = (instruction.to_ascii_uppercase(), args.trim().to_owned());
        if instruction == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                _ => None,
            };
            stages.push(Stage {
                image: words[0].to_owned(),
                name,
                instructions: Vec::new(),
            });
        } else {
            let stage = stages.last_mut().expect("an instruction before FROM");
            stage.instructions.push((instruction, args));
        }
    }
    stages
}

/// An exec-form (JSON array) argument, as `CMD`, `ENTRYPOINT` and `VOLUME` are written.
fn json_array(args: &str) -> Vec<String> {
    serde_json::from_str(args).unwrap_or_else(|e| panic!("not a JSON array: {args}: {e}"))
}

/// Whether the build context (`.dockerignore`) lets `path` in: the file's rules are read
/// as Docker does for top-level names (`*` = everything, `!name` lets `name` back in; the
/// last matching rule wins). Rules this test does not understand fail it.
fn in_context(path: &str) -> bool {
    let rules = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    let top = path.trim_start_matches("./").split('/').next().unwrap();
    let mut included = true;
    for rule in rules.lines().map(str::trim) {
        if rule.is_empty() || rule.starts_with('#') {
            continue;
        }
        let (negated, pattern) = match rule.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, rule),
        };
        let pattern = pattern.trim_matches('/');
        assert!(
            pattern == "*" || !pattern.contains(['*', '?', '[', '/']),
            ".dockerignore rule {rule:?} is beyond this test's reading"
        );
        if pattern == "*" || pattern == top {
            included = negated;
        }
    }
    included
}

fn build_stage(stages: &[Stage]) -> &Stage {
    let last = stages.last().unwrap();
    let from = last
        .all("COPY")
        .into_iter()
        .find_map(|c| copy(c).from)
        .expect("the runtime stage copies nothing from a build stage");
    stages
        .iter()
        .find(|s| s.name.as_deref() == Some(from))
        .unwrap_or_else(|| panic!("no stage named {from}"))
}

#[test]
fn everything_copied_exists_and_is_in_the_build_context() {
    for stage in stages() {
        for args in stage.all("COPY") {
            let c = copy(args);
            if c.from.is_some() {
                continue;
            }
            for source in c.sources {
                assert!(
                    repo().join(source).exists(),
                    "COPY {source}: not in the repo"
                );
                assert!(
                    in_context(source),
                    "COPY {source}: left out by .dockerignore"
                );
            }
        }
    }
    // What must never be sent to the daemon: build output, local data, history.
    for heavy in ["target", "data", ".git", "fuzz", "e2e", "examples", "tests"] {
        assert!(!in_context(heavy), "{heavy} is in the build context");
    }
}

#[test]
fn only_what_the_build_and_the_image_need_is_copied() {
    let mut copied: Vec<String> = stages()
        .iter()
        .flat_map(|s| s.all("COPY"))
        .map(copy)
        .filter(|c| c.from.is_none())
        .flat_map(|c| c.sources)
        .map(|s| s.trim_start_matches("./").trim_end_matches('/').to_owned())
        .collect();
    copied.sort();
    // The manifest and lock file, build.rs and the protos it compiles (its include root is
    // `proto`), the sources; and the sample resources the image ships.
    let build_rs = std::fs::read_to_string(repo().join("build.rs")).unwrap();
    assert!(build_rs.contains(r#"Compiler::new(["proto"])"#));
    assert_eq!(
        copied,
        [
            "Cargo.lock",
            "Cargo.toml",
            "build.rs",
            "config/resiliency.yaml",
            "proto",
            "src"
        ]
    );
}

#[test]
fn the_build_needs_no_protoc() {
    let stages = stages();
    for stage in &stages {
        for run in stage.all("RUN") {
            for tool in ["protoc", "protobuf"] {
                assert!(!run.contains(tool), "RUN installs or calls {tool}: {run}");
            }
        }
    }
    let build = build_stage(&stages);
    let cargo = build
        .all("RUN")
        .into_iter()
        .find(|r| r.contains("cargo build"))
        .expect("no cargo build");
    for flag in ["--release", "--locked", "--bin jobsd"] {
        assert!(cargo.contains(flag), "cargo build without {flag}: {cargo}");
    }
}

#[test]
fn the_runtime_stage_has_the_binary_and_no_build_tools() {
    let stages = stages();
    assert!(
        stages.len() >= 2,
        "a single-stage image keeps the toolchain"
    );
    let runtime = stages.last().unwrap();
    assert!(
        !runtime.image.contains("rust") && runtime.image.contains("distroless"),
        "runtime image {}",
        runtime.image
    );
    assert!(
        runtime.all("RUN").is_empty(),
        "the runtime stage runs commands (it has no shell)"
    );
    let workdir = build_stage(&stages).last("WORKDIR");
    let binary = runtime
        .all("COPY")
        .into_iter()
        .map(copy)
        .find(|c| c.from.is_some() && c.dest == "/usr/local/bin/jobsd")
        .expect("the binary is not copied to /usr/local/bin/jobsd");
    assert_eq!(
        binary.sources,
        [format!("{workdir}/target/release/jobsd").as_str()]
    );
    assert_eq!(
        json_array(runtime.last("ENTRYPOINT")),
        ["/usr/local/bin/jobsd"]
    );
}

#[test]
fn data_is_made_and_owned_by_the_non_root_user_the_image_runs_as() {
    let stages = stages();
    let runtime = stages.last().unwrap();
    let user = runtime.last("USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|uid| uid != 0),
        "USER {user} is not a non-root uid"
    );

    let data = runtime
        .all("COPY")
        .into_iter()
        .map(copy)
        .find(|c| c.dest == "/data")
        .expect("/data is not made in the image");
    assert_eq!(data.chown, Some(user), "/data is not owned by USER {user}");
    let stage = stages
        .iter()
        .find(|s| s.name.as_deref() == data.from)
        .expect("/data comes from no named stage");
    let source = data.sources[0];
    assert!(
        stage
            .all("RUN")
            .iter()
            .any(|r| r.contains("mkdir -p") && r.contains(source)),
        "{source} is not made in stage {:?}",
        stage.name
    );

    assert!(json_array(runtime.last("VOLUME")).contains(&"/data".to_owned()));
    let cmd = json_array(runtime.last("CMD"));
    assert!(
        cmd.windows(2).any(|w| w == ["--data-dir", "/data"])
            || cmd.contains(&"--data-dir=/data".to_owned()),
        "CMD does not keep the store in the volume: {cmd:?}"
    );
}
