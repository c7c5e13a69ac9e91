//! The compose examples in `config/` (the development machines have no Docker engine, so they
//! are checked by reading them): every jobsd command line parses and validates as jobsd reads
//! it, what they build and mount exists, and the services they name are there with the ports
//! the commands use.

use std::collections::BTreeSet;
use std::path::Path;

use jobsd::config::{self, Command, Env};
use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A compose file's services, with YAML merge keys resolved.
fn services(file: &str) -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(repo().join("config").join(file)).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    doc["services"]
        .as_object()
        .unwrap_or_else(|| panic!("{file}: no services"))
        .clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The value after `flag` in a command line.
fn flag<'a>(command: &'a [String], flag: &str) -> Option<&'a str> {
    let at = command.iter().position(|w| w == flag)?;
    command.get(at + 1).map(String::as_str)
}

/// Checks one compose file; gives the jobsd services' (name, command).
fn check(file: &str) -> Vec<(String, Vec<String>)> {
    let services = services(file);
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    let mut jobsd = Vec::new();
    for (name, s) in &services {
        for dep in strings(&s["depends_on"]) {
            assert!(
                names.contains(dep.as_str()),
                "{file}: {name} depends on {dep}"
            );
        }
        if let Some(mode) = s["network_mode"].as_str() {
            let shared = mode.strip_prefix("service:").expect(mode);
            assert!(names.contains(shared), "{file}: {name} shares {shared}");
        }
        for volume in strings(&s["volumes"]) {
            if let Some(local) = volume.strip_prefix("./") {
                let dir = local.split(':').next().unwrap();
                assert!(
                    repo().join("config").join(dir).exists(),
                    "{file}: {name} mounts {volume}"
                );
            }
        }
        if s["image"] == "jobsd:dev" {
            let context = s["build"]["context"].as_str().expect("jobsd is built");
            let dockerfile = s["build"]["dockerfile"].as_str().unwrap();
            assert!(
                repo()
                    .join("config")
                    .join(context)
                    .join(dockerfile)
                    .exists(),
                "{file}: {name} builds {context}/{dockerfile}"
            );
            jobsd.push((name.clone(), strings(&s["command"])));
        }
    }
    for (name, command) in &jobsd {
        let argv = std::iter::once("jobsd".to_owned()).chain(command.iter().cloned());
        let (cli, ignored) = config::parse(argv).unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
        assert!(ignored.is_empty(), "{file}: {name}: ignored {ignored}");
        match cli.command {
            Some(Command::Scheduler(args)) => {
                let replica = args.validate().unwrap();
                // The address it announces is its own service name and port.
                let announced = flag(command, "--override-broadcast-host-port").unwrap();
                assert_eq!(announced, format!("{name}:{}", replica.listen.port()));
            }
            Some(other) => panic!("{file}: {name}: {other:?}"),
            None => {
                let sidecar = cli.sidecar.validate(Env::default()).unwrap();
                // Its app shares its network: the app's service publishes its API ports.
                let shared = services[name]["network_mode"].as_str().unwrap();
                let app = &services[shared.strip_prefix("service:").unwrap()];
                let published = strings(&app["ports"]);
                for port in [3500, 50001] {
                    assert!(
                        published.contains(&format!("{port}:{port}")),
                        "{file}: {port} not published on {shared}"
                    );
                }
                assert!(
                    sidecar.app_address.is_some(),
                    "{file}: {name} calls its app"
                );
                for host in sidecar.scheduler_hosts {
                    let (service, port) = host.split_once(':').unwrap();
                    let replica = &services[service]["command"];
                    assert_eq!(flag(&strings(replica), "--port"), Some(port), "{host}");
                }
            }
        }
    }
    jobsd
}

#[test]
fn the_sidecar_example_runs_jobsd_next_to_its_app() {
    let jobsd = check("compose.yaml");
    assert_eq!(jobsd.len(), 1);
    assert_eq!(
        flag(&jobsd[0].1, "--data-dir"),
        Some("/data"),
        "kept in the volume"
    );
}

#[test]
fn the_cluster_example_runs_three_replicas_on_etcd_and_a_forwarding_sidecar() {
    let jobsd = check("compose.cluster.yaml");
    let replicas: Vec<_> = jobsd
        .iter()
        .filter(|(_, c)| c.first().map(String::as_str) == Some("scheduler"))
        .collect();
    assert_eq!(replicas.len(), 3);
    let ids: BTreeSet<_> = replicas
        .iter()
        .map(|(_, c)| flag(c, "--id").unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "distinct replica ids");
    for (_, c) in &replicas {
        assert_eq!(flag(c, "--etcd-endpoints"), Some("http://etcd:2379"));
    }
    let sidecar = jobsd.iter().find(|(n, _)| n == "sidecar").unwrap();
    let hosts = flag(&sidecar.1, "--scheduler-host-address").unwrap();
    assert_eq!(hosts.split(',').count(), 3, "forwards to every replica");
}
