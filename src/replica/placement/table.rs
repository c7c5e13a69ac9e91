//! The hosts of one namespace as their streams last reported them, and the placement tables
//! made of them (Dapr 1.18's `pkg/placement/internal/loops/disseminator/store`).

use std::collections::{BTreeMap, HashMap};

use crate::proto::dapr_placement as pv1;

/// The hosts with at least one actor type, by stream.
#[derive(Debug, Default)]
pub struct Hosts {
    /// Stream index → the host as it last reported itself (entities sorted).
    by_stream: BTreeMap<u64, pv1::Host>,
}

impl Hosts {
    /// Records `host` for `stream`; whether the tables change (its actor types, app id or
    /// namespace differ). A host without actor types is not kept.
    pub fn set(&mut self, stream: u64, mut host: pv1::Host) -> bool {
        host.entities.sort();
        let changed = match self.by_stream.get(&stream) {
            None => !host.entities.is_empty(),
            Some(had) => {
                had.entities != host.entities
                    || had.id != host.id
                    || had.namespace != host.namespace
            }
        };
        if !changed {
            return false;
        }
        if host.entities.is_empty() {
            self.by_stream.remove(&stream);
        } else {
            self.by_stream.insert(stream, host);
        }
        true
    }

    /// Whether `stream`'s host is in the tables.
    pub fn has(&self, stream: u64) -> bool {
        self.by_stream.contains_key(&stream)
    }

    /// Takes `stream`'s host out.
    pub fn delete(&mut self, stream: u64) {
        self.by_stream.remove(&stream);
    }

    /// The streams whose host is kept but that are not `active` any more.
    pub fn orphans(&self, active: impl Fn(u64) -> bool) -> Vec<u64> {
        self.by_stream
            .keys()
            .copied()
            .filter(|s| !active(*s))
            .collect()
    }

    /// The tables daprd receives in an update: per actor type, its hosts by name.
    pub fn tables(&self, version: u64, replication_factor: i64) -> pv1::PlacementTables {
        let mut entries: HashMap<String, pv1::PlacementTable> = HashMap::new();
        for host in self.by_stream.values() {
            for entity in &host.entities {
                entries
                    .entry(entity.clone())
                    .or_default()
                    .load_map
                    .insert(host.name.clone(), host.clone());
            }
        }
        #[allow(deprecated)]
        pv1::PlacementTables {
            entries,
            version: version.to_string(),
            api_level: 0,
            replication_factor,
        }
    }

    /// The namespace's state for `GET /placement/state`: its hosts by name, and the version.
    pub fn state(&self, version: u64) -> pv1::StatePlacementTable {
        let mut hosts: Vec<pv1::Host> = self.by_stream.values().cloned().collect();
        hosts.sort_by(|a, b| a.name.cmp(&b.name));
        pv1::StatePlacementTable { hosts, version }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, entities: &[&str]) -> pv1::Host {
        pv1::Host {
            name: name.into(),
            id: "app".into(),
            namespace: "default".into(),
            entities: entities.iter().map(|e| (*e).into()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_host_counts_by_its_actor_types_id_and_namespace() {
        let mut hosts = Hosts::default();
        assert!(
            !hosts.set(0, host("a:1", &[])),
            "no actors: nothing changes"
        );
        assert!(!hosts.has(0));
        assert!(hosts.set(0, host("a:1", &["b", "a"])));
        assert!(
            !hosts.set(0, host("a:1", &["a", "b"])),
            "same types, other order"
        );
        assert!(hosts.set(0, host("a:1", &["a"])));
        assert!(hosts.set(0, host("a:1", &[])), "types gone: the host goes");
        assert!(!hosts.has(0));
    }

    #[test]
    #[allow(deprecated)]
    fn tables_list_each_types_hosts_by_name() {
        let mut hosts = Hosts::default();
        hosts.set(0, host("a:1", &["x", "y"]));
        hosts.set(1, host("b:2", &["y"]));
        let t = hosts.tables(7, 100);
        assert_eq!(t.version, "7");
        assert_eq!(t.replication_factor, 100);
        assert_eq!(t.entries["x"].load_map.len(), 1);
        let mut y: Vec<_> = t.entries["y"].load_map.keys().cloned().collect();
        y.sort();
        assert_eq!(y, ["a:1", "b:2"]);
        assert_eq!(hosts.orphans(|s| s == 0), [1]);
        let state = hosts.state(7);
        assert_eq!(state.hosts.len(), 2);
        assert_eq!(state.hosts[0].name, "a:1");
    }
}
