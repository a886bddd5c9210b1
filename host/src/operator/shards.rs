//! Sharding, the deciding half: which replicas are live shards, which shard each object
//! belongs to, and how an object moves from one shard to another. The model is
//! `timebertt/kubernetes-controller-sharding`: every replica holds a shard Lease of its
//! own; objects carry their shard as a label and each replica watches only its own; the
//! leader hashes every object onto a ring of the live shard Leases. An object moves from a
//! live shard only through a drain: the leader labels it, the shard stops working on it and
//! removes both labels (`controllers::kit::release`), and only then is it assigned anew.
//! An object of a dead shard moves at once, after the leader has taken the dead shard's
//! Lease (and for as long as objects still name the shard), so that the shard, should it
//! come back, sees it lost its Lease and stops, and a replica restarted under the same
//! identity waits until they moved.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The holder the leader writes into a shard Lease that expired, before it moves that
/// shard's objects away (the shard, should it wake up, sees it lost its Lease).
pub(crate) const DEAD_HOLDER: &str = "tessera-sharder";

/// Points each shard has on the ring: enough that a few shards split objects evenly.
const POINTS_PER_SHARD: usize = 100;

/// A consistent-hash ring over the live shards: a shard joining or leaving moves only the
/// objects it takes or leaves, about 1/N of them.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    points: Vec<(u64, usize)>,
    shards: Vec<String>,
}

/// 64 bits of SHA-256: the same on every replica and every version of the host, so that a
/// new leader keeps the assignments of the last.
fn hash(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl Ring {
    pub(crate) fn new(shards: impl IntoIterator<Item = String>) -> Self {
        let mut shards: Vec<String> = shards.into_iter().collect();
        shards.sort();
        shards.dedup();
        let mut points: Vec<(u64, usize)> = shards
            .iter()
            .enumerate()
            .flat_map(|(i, shard)| {
                (0..POINTS_PER_SHARD).map(move |p| (hash(&format!("{shard}#{p}")), i))
            })
            .collect();
        points.sort_unstable();
        Self { points, shards }
    }

    /// The shard `key` belongs to (`None` while no shard is live).
    pub(crate) fn pick(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let h = hash(key);
        let at = self.points.partition_point(|(p, _)| *p < h) % self.points.len();
        Some(&self.shards[self.points[at].1])
    }
}

/// A shard Lease as the leader judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Held by its shard and renewed in time: in the ring.
    Ready,
    /// Its shard stopped renewing it: the leader takes it before moving its objects.
    Expired,
    /// Given back by its shard (a clean stop), or made and not yet taken: the leader takes
    /// it before moving its objects, so that a replica restarted under the same identity
    /// cannot take it back while they move.
    Released,
    /// Taken by the leader, or gone: its objects move at once. A shard without a Lease
    /// counts as dead too.
    Dead,
}

/// What the leader reads from a shard Lease.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaseView {
    pub(crate) holder: Option<String>,
    /// When the holder last renewed it.
    pub(crate) renewed: Option<jiff::Timestamp>,
    pub(crate) duration_s: Option<i32>,
}

/// Judge the Lease of `shard` at `now`.
pub(crate) fn liveness(shard: &str, lease: &LeaseView, now: jiff::Timestamp) -> Liveness {
    match lease.holder.as_deref() {
        Some(holder) if holder == shard => {
            let duration = jiff::SignedDuration::from_secs(lease.duration_s.unwrap_or(0).into());
            match lease.renewed {
                Some(renewed) if renewed + duration > now => Liveness::Ready,
                _ => Liveness::Expired,
            }
        }
        None => Liveness::Released,
        Some(_) => Liveness::Dead,
    }
}

/// How long until the first Ready Lease of `leases` expires, if one does: the leader looks
/// again then instead of at its next tick, as no event marks a Lease running out (a dead
/// shard's objects would wait up to a tick more).
pub(crate) fn next_expiry<'a>(
    leases: impl IntoIterator<Item = (&'a str, &'a LeaseView)>,
    now: jiff::Timestamp,
) -> Option<std::time::Duration> {
    leases
        .into_iter()
        .filter(|(shard, lease)| liveness(shard, lease, now) == Liveness::Ready)
        .filter_map(|(_, lease)| {
            let duration = jiff::SignedDuration::from_secs(lease.duration_s?.into());
            let left = (lease.renewed? + duration).duration_since(now);
            std::time::Duration::try_from(left).ok()
        })
        .min()
}

/// What the leader reads from an object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement<'a> {
    /// Its shard label.
    pub(crate) shard: Option<&'a str>,
    /// Its drain label is set: its shard is asked to let it go.
    pub(crate) draining: bool,
    /// It is being deleted: its shard finishes that.
    pub(crate) deleting: bool,
    /// What it is hashed by (see [`super::sharder`]'s keys).
    pub(crate) key: &'a str,
}

/// What the leader does about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Move {
    /// Leave it.
    Stay,
    /// Label it for this shard (and clear a drain label).
    Assign(String),
    /// Ask its live shard to let it go.
    Drain,
}

/// Where `object` goes, given the ring of ready shards and every known shard's liveness.
pub(crate) fn decide(
    object: Placement<'_>,
    ring: &Ring,
    shards: &BTreeMap<String, Liveness>,
) -> Move {
    let Some(wanted) = ring.pick(object.key) else {
        return Move::Stay;
    };
    let Some(current) = object.shard else {
        return Move::Assign(wanted.to_string());
    };
    match shards.get(current).copied().unwrap_or(Liveness::Dead) {
        Liveness::Dead => Move::Assign(wanted.to_string()),
        // Not before the Lease is taken: the shard may only be slow, or come back.
        Liveness::Expired | Liveness::Released => Move::Stay,
        // Wanted back where it is: clear the drain instead of a release and a new label.
        Liveness::Ready if current == wanted && object.draining => Move::Assign(wanted.to_string()),
        Liveness::Ready if current == wanted || object.draining || object.deleting => Move::Stay,
        Liveness::Ready => Move::Drain,
    }
}

/// What the leader does about one shard Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseMove {
    Keep,
    /// Take it (it expired or was given back), or take it again (objects still name its
    /// shard), so that its shard cannot come back while they move.
    TakeOver,
    /// Delete it: dead, and no object names its shard any more.
    Delete,
}

/// Facts about a shard Lease besides its liveness.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LeaseFacts {
    /// Objects still name its shard.
    pub(crate) has_objects: bool,
    /// Made less than a lease duration ago (a replica makes its Lease before it takes it:
    /// until then it has no holder, like one given back).
    pub(crate) young: bool,
    /// Renewed less than a third of a lease duration ago (by the leader's last take, when
    /// dead): taking it again can wait.
    pub(crate) fresh: bool,
}

/// What becomes of a shard's Lease.
pub(crate) fn lease_move(liveness: Liveness, facts: LeaseFacts) -> LeaseMove {
    let LeaseFacts {
        has_objects,
        young,
        fresh,
    } = facts;
    match liveness {
        Liveness::Ready => LeaseMove::Keep,
        Liveness::Expired => LeaseMove::TakeOver,
        Liveness::Dead if has_objects && fresh => LeaseMove::Keep,
        Liveness::Released | Liveness::Dead if has_objects => LeaseMove::TakeOver,
        Liveness::Released | Liveness::Dead if young => LeaseMove::Keep,
        Liveness::Released | Liveness::Dead => LeaseMove::Delete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(shards: &[&str]) -> Ring {
        Ring::new(shards.iter().map(|s| s.to_string()))
    }

    fn keys() -> Vec<String> {
        (0..3000)
            .map(|i| format!("kcp-system/runtime-{i}"))
            .collect()
    }

    #[test]
    fn objects_spread_evenly_and_a_joining_shard_moves_only_its_share() {
        let two = ring(&["a", "b"]);
        let three = ring(&["a", "b", "c"]);
        let keys = keys();
        let on_a = keys.iter().filter(|k| two.pick(k) == Some("a")).count();
        assert!((1200..1800).contains(&on_a), "a holds {on_a} of 3000");
        let moved: Vec<_> = keys
            .iter()
            .filter(|k| two.pick(k) != three.pick(k))
            .collect();
        assert!((700..1300).contains(&moved.len()), "{} moved", moved.len());
        // Every object that moved went to the new shard: none moved between a and b.
        assert!(moved.iter().all(|k| three.pick(k) == Some("c")));
    }

    #[test]
    fn the_ring_is_the_same_whatever_order_the_shards_come_in() {
        let (ab, ba) = (ring(&["a", "b"]), ring(&["b", "a", "b"]));
        assert!(keys().iter().all(|k| ab.pick(k) == ba.pick(k)));
        assert_eq!(Ring::default().pick("x"), None);
    }

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_lease_is_ready_while_its_shard_renews_it() {
        let lease = |holder: Option<&str>, renewed: i64| LeaseView {
            holder: holder.map(str::to_string),
            renewed: Some(at(renewed)),
            duration_s: Some(15),
        };
        assert_eq!(liveness("a", &lease(Some("a"), 0), at(14)), Liveness::Ready);
        assert_eq!(
            liveness("a", &lease(Some("a"), 0), at(15)),
            Liveness::Expired
        );
        assert_eq!(liveness("a", &lease(None, 0), at(1)), Liveness::Released);
        assert_eq!(
            liveness("a", &lease(Some(DEAD_HOLDER), 0), at(1)),
            Liveness::Dead
        );
    }

    #[test]
    fn the_leader_looks_again_when_the_first_live_lease_runs_out() {
        let lease = |holder: &str, renewed: i64| LeaseView {
            holder: Some(holder.to_string()),
            renewed: Some(at(renewed)),
            duration_s: Some(15),
        };
        let (a, b, gone) = (lease("a", 0), lease("b", 5), lease(DEAD_HOLDER, 9));
        let leases = [("a", &a), ("b", &b), ("c", &gone)];
        assert_eq!(
            next_expiry(leases, at(3)),
            Some(std::time::Duration::from_secs(12))
        );
        // a has run out: b's is next; nothing once none is live.
        assert_eq!(
            next_expiry(leases, at(16)),
            Some(std::time::Duration::from_secs(4))
        );
        assert_eq!(next_expiry(leases, at(20)), None);
    }

    fn shards(of: &[(&str, Liveness)]) -> BTreeMap<String, Liveness> {
        of.iter().map(|(s, l)| (s.to_string(), *l)).collect()
    }

    fn placed<'a>(shard: Option<&'a str>, key: &'a str) -> Placement<'a> {
        Placement {
            shard,
            draining: false,
            deleting: false,
            key,
        }
    }

    #[test]
    fn objects_move_from_live_shards_only_through_a_drain() {
        let ring = ring(&["a", "b"]);
        let key = keys()
            .into_iter()
            .find(|k| ring.pick(k) == Some("b"))
            .unwrap();
        let live = shards(&[("a", Liveness::Ready), ("b", Liveness::Ready)]);
        assert_eq!(
            decide(placed(None, &key), &ring, &live),
            Move::Assign("b".into())
        );
        assert_eq!(decide(placed(Some("b"), &key), &ring, &live), Move::Stay);
        assert_eq!(decide(placed(Some("a"), &key), &ring, &live), Move::Drain);
        let draining = Placement {
            draining: true,
            ..placed(Some("a"), &key)
        };
        assert_eq!(decide(draining, &ring, &live), Move::Stay);
        let deleting = Placement {
            deleting: true,
            ..placed(Some("a"), &key)
        };
        assert_eq!(
            decide(deleting, &ring, &live),
            Move::Stay,
            "its shard finishes it"
        );
    }

    #[test]
    fn objects_of_a_dead_shard_move_at_once_and_of_an_expired_one_only_once_it_is_taken() {
        let ring = ring(&["b"]);
        let expired = shards(&[("a", Liveness::Expired), ("b", Liveness::Ready)]);
        assert_eq!(decide(placed(Some("a"), "k"), &ring, &expired), Move::Stay);
        let released = shards(&[("a", Liveness::Released), ("b", Liveness::Ready)]);
        assert_eq!(decide(placed(Some("a"), "k"), &ring, &released), Move::Stay);
        let dead = shards(&[("a", Liveness::Dead), ("b", Liveness::Ready)]);
        assert_eq!(
            decide(placed(Some("a"), "k"), &ring, &dead),
            Move::Assign("b".into())
        );
        // A shard no Lease names is dead.
        assert_eq!(
            decide(placed(Some("z"), "k"), &ring, &dead),
            Move::Assign("b".into())
        );
        // Without a live shard nothing moves.
        assert_eq!(
            decide(placed(Some("a"), "k"), &Ring::default(), &dead),
            Move::Stay
        );
    }

    #[test]
    fn leases_are_taken_while_objects_move_and_go_once_none_names_them() {
        let facts = |has_objects, young, fresh| LeaseFacts {
            has_objects,
            young,
            fresh,
        };
        let moved = |l, f| lease_move(l, f);
        assert_eq!(
            moved(Liveness::Ready, facts(false, false, false)),
            LeaseMove::Keep
        );
        assert_eq!(
            moved(Liveness::Expired, facts(true, false, true)),
            LeaseMove::TakeOver
        );
        // Taken again while objects still name the shard: it cannot come back meanwhile;
        // not on every pass.
        assert_eq!(
            moved(Liveness::Dead, facts(true, false, false)),
            LeaseMove::TakeOver
        );
        assert_eq!(
            moved(Liveness::Dead, facts(true, false, true)),
            LeaseMove::Keep
        );
        assert_eq!(
            moved(Liveness::Released, facts(true, true, true)),
            LeaseMove::TakeOver
        );
        assert_eq!(
            moved(Liveness::Dead, facts(false, false, false)),
            LeaseMove::Delete
        );
        assert_eq!(
            moved(Liveness::Released, facts(false, false, true)),
            LeaseMove::Delete
        );
        assert_eq!(
            moved(Liveness::Released, facts(false, true, false)),
            LeaseMove::Keep
        );
    }
}
