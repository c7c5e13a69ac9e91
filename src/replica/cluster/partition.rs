//! Which replica fires which job: jobs fall into a fixed number of partitions by a stable hash
//! of their key, and each partition belongs to the live member that rendezvous hashing picks.
//!
//! Rendezvous (highest random weight) hashing moves only what must move: when a member leaves,
//! only its partitions get new owners; when it comes back, exactly those move back. Dapr's
//! `partition_id % total` instead reassigns nearly every job on any membership change, which is
//! why it has to stop the world.

use std::collections::BTreeSet;

use crate::store::etcd::partition::{FNV_OFFSET, fnv1a, mix};
pub use crate::store::etcd::partition_of;

/// The member that owns `partition`: the one with the highest weight for it (ties, which
/// need equal hashes, go to the smallest id). `None` without members.
pub fn owner_of(partition: u32, members: &[String]) -> Option<&str> {
    members
        .iter()
        .map(|id| {
            let weight = mix(fnv1a(
                fnv1a(FNV_OFFSET, id.as_bytes()),
                &partition.to_le_bytes(),
            ));
            (weight, std::cmp::Reverse(id.as_str()))
        })
        .max()
        .map(|(_, std::cmp::Reverse(id))| id)
}

/// The partitions `me` owns among `members`.
pub fn share_of(me: &str, members: &[String], count: u32) -> BTreeSet<u32> {
    (0..count.max(1))
        .filter(|p| owner_of(*p, members) == Some(me))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("dapr-scheduler-server-{i}"))
            .collect()
    }

    #[test]
    fn partitions_are_stable_and_in_range() {
        // Fixed values: every replica, of every build, must agree.
        assert_eq!(
            partition_of("app||default||myapp||job", 64),
            partition_of("app||default||myapp||job", 64)
        );
        for i in 0..1000 {
            assert!(partition_of(&format!("app||default||a||{i}"), 64) < 64);
        }
        assert_eq!(partition_of("x", 0), 0);
        assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn keys_spread_over_partitions() {
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[partition_of(&format!("app||default||myapp||job-{i}"), 16) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
    }

    #[test]
    fn every_partition_has_exactly_one_owner() {
        let members = ids(3);
        let shares: Vec<_> = members.iter().map(|m| share_of(m, &members, 256)).collect();
        let total: usize = shares.iter().map(BTreeSet::len).sum();
        assert_eq!(total, 256);
        for (i, a) in shares.iter().enumerate() {
            for b in &shares[i + 1..] {
                assert!(a.is_disjoint(b));
            }
            // Fair enough: 256 / 3 ≈ 85 each.
            assert!((60..=110).contains(&a.len()), "{}", a.len());
        }
        assert_eq!(owner_of(7, &[]), None);
    }

    #[test]
    fn only_the_leavers_share_moves() {
        let all = ids(3);
        let without: Vec<String> = all.iter().filter(|m| *m != &all[1]).cloned().collect();
        for p in 0..256 {
            let before = owner_of(p, &all).unwrap();
            let after = owner_of(p, &without).unwrap();
            if before != all[1] {
                assert_eq!(before, after, "partition {p} moved without need");
            }
        }
        // And it all comes back when the member returns.
        for m in &all {
            let again = share_of(m, &all, 256);
            assert_eq!(again, share_of(m, &all, 256));
        }
    }
}
