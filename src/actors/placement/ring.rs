//! Dapr's hash ring (`pkg/placement/hashing` of Dapr 1.18), as every sidecar builds it from
//! the placement tables: each host of an actor type gets `replication_factor` points
//! (BLAKE2b-512 of `<host name><i>`, its first 8 bytes little-endian), and an actor lives on
//! the host of the first point at or after the hash of its id (wrapping). daprd and jobsd
//! sidecars must agree on every actor's host, so this is Dapr's ring, point for point.

use std::collections::HashMap;

use blake2::{Blake2b512, Digest};

use crate::proto::dapr_placement as pv1;

/// A host of an actor type, as the tables name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `address:port` of its internal gRPC port.
    pub name: String,
    /// Its app id.
    pub app_id: String,
}

/// The ring of one actor type.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// (point, index in `hosts`), sorted by point.
    points: Vec<(u64, usize)>,
    hosts: Vec<Host>,
}

/// Dapr's hash of a key: the first 8 bytes of its BLAKE2b-512, little-endian.
pub fn hash(key: &str) -> u64 {
    let digest = Blake2b512::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

impl Ring {
    /// The ring of one type's `load_map` (host name → host).
    pub fn new(load_map: &HashMap<String, pv1::Host>, replication_factor: i64) -> Ring {
        let mut names: Vec<&String> = load_map.keys().collect();
        names.sort();
        let mut ring = Ring::default();
        let factor = usize::try_from(replication_factor.max(1)).unwrap_or(1);
        for name in names {
            let host = &load_map[name];
            let index = ring.hosts.len();
            ring.hosts.push(Host {
                name: host.name.clone(),
                app_id: host.id.clone(),
            });
            for i in 0..factor {
                ring.points.push((hash(&format!("{name}{i}")), index));
            }
        }
        ring.points.sort_unstable();
        // Dapr keeps one host per point (a map): of two hosts on one point, one wins.
        ring.points.dedup_by_key(|p| p.0);
        ring
    }

    /// The host of `actor_id`; `None` when the type has no host.
    pub fn owner(&self, actor_id: &str) -> Option<&Host> {
        if self.points.is_empty() {
            return None;
        }
        let h = hash(actor_id);
        let at = self.points.partition_point(|p| p.0 < h);
        let (_, index) = self.points[if at == self.points.len() { 0 } else { at }];
        self.hosts.get(index)
    }

    /// The hosts on the ring.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
}

/// The rings of every actor type, from one update.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    /// The update's version.
    pub version: u64,
    /// Actor type → its ring.
    pub types: HashMap<String, Ring>,
}

impl Tables {
    /// The rings of `tables` (an update's).
    pub fn from_update(version: u64, tables: &pv1::PlacementTables) -> Tables {
        Tables {
            version,
            types: tables
                .entries
                .iter()
                .map(|(t, table)| {
                    (
                        t.clone(),
                        Ring::new(&table.load_map, tables.replication_factor),
                    )
                })
                .collect(),
        }
    }

    /// The host of `actor_type`/`actor_id`, if the type has hosts.
    pub fn owner(&self, actor_type: &str, actor_id: &str) -> Option<&Host> {
        self.types.get(actor_type)?.owner(actor_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_daprs_blake2b_first_eight_bytes() {
        // Python's hashlib.blake2b(key, digest_size=64), first 8 bytes little-endian.
        assert_eq!(hash("host-0:12340"), 13_736_081_772_454_568_544);
        assert_eq!(hash("host-0:12341"), 3_613_560_709_047_543_989);
        assert_eq!(hash("a1"), 3_858_575_177_353_575_599);
    }

    fn load_map(names: &[&str]) -> HashMap<String, pv1::Host> {
        names
            .iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    pv1::Host {
                        name: (*n).into(),
                        id: "app".into(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    #[test]
    fn an_actor_lives_on_the_host_of_the_next_point_and_few_move_when_a_host_joins() {
        let ring = Ring::new(&load_map(&["a:1", "b:2", "c:3"]), 100);
        assert_eq!(ring.points.len(), 300);
        let owners: Vec<String> = (0..3000)
            .map(|i| ring.owner(&format!("actor-{i}")).unwrap().name.clone())
            .collect();
        for host in ["a:1", "b:2", "c:3"] {
            let n = owners.iter().filter(|o| *o == host).count();
            assert!((600..=1400).contains(&n), "{host}: {n} of 3000");
        }
        let bigger = Ring::new(&load_map(&["a:1", "b:2", "c:3", "d:4"]), 100);
        let moved = (0..3000)
            .filter(|i| {
                let after = &bigger.owner(&format!("actor-{i}")).unwrap().name;
                after != &owners[*i]
            })
            .count();
        assert!(moved < 1300, "only the new host's share moves: {moved}");
        for (i, before) in owners.iter().enumerate() {
            let after = &bigger.owner(&format!("actor-{i}")).unwrap().name;
            assert!(
                after == before || after == "d:4",
                "moved only to the new host"
            );
        }
        assert!(Ring::default().owner("x").is_none());
    }
}
