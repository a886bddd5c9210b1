//! The Shoots of the project as the watch of Shoots last saw them, so that a settled
//! Runtime is judged without a request to Gardener: a restarted host (or one that took the
//! lease over) would otherwise read every Shoot once, about N/5 seconds under Gardener's
//! default budget of 5 requests/s (over half an hour for 10,000 Runtimes).
//!
//! The cache answers only for what it has caught up with. A Shoot this host read or wrote
//! itself at a version the watch has not delivered yet is read from Gardener again (a
//! reconcile right after a patch must not judge the Shoot from before it, nor after a
//! relist from the API server's cache, which may be older than the patch); so is every
//! Shoot while the watch is down or relisting. Decisions that write to Gardener read the Shoot
//! afresh anyway (`Machine::fresh_shoot`): the cache only saves the reads of reconciles
//! that end with nothing to do. A Shoot Gardener is working on is answered only when the
//! watch delivered it recently ([`Freshness::DeliveredWithin`]): the reconciles its events
//! and the Runtime's own status writes cause read the cache, a poll after a quiet spell
//! reads Gardener (the watch may lag or have stalled).
//!
//! Shoots are kept slimmed (`api::slim`): who wrote a Shoot is what a settled Runtime's
//! judgement needs (KIM's field manager); which fields each manager owns only a write
//! does, and that reads the Shoot afresh. And they are kept as deflated JSON text
//! (`crate::packed`), parsed when read: a Shoot as a `serde_json::Value` tree costs about
//! 40 KB of heap (a heap profile of `./x load --runtimes 1000 --replicas 3`: 39 MiB of a
//! replica's 94 MiB peak), its text a tenth of that (4.3 MiB at 1,000 Shoots), deflated a
//! third of the text; every replica holds every Shoot of the project (a handover must not
//! cost Gardener a read per Runtime), and a settled Runtime's Shoot is read once per resync.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::runtime::watcher;

use crate::packed::Packed;

/// Shoots as the watch delivered them, and what this host knows to be newer.
#[derive(Default)]
pub(crate) struct ShootCache {
    inner: Mutex<Inner>,
    /// How far the watch is.
    state: tokio::sync::watch::Sender<State>,
}

/// How far the watch of Shoots is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Listing (at start, or again after a failure): worth waiting for.
    #[default]
    Listing,
    /// A complete list went through and the watch has not failed since.
    Synced,
    /// The watch failed: the cache answers for nothing until the next complete list.
    Down,
}

/// A Shoot's `namespace/name`.
type Key = Box<str>;

/// How recent a cached Shoot must be to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Any entry the watch caught up with (a settled Runtime: every change brings an
    /// event, and a missed one is no work lost).
    Any,
    /// Delivered by the watch (or its list) within this long (a Shoot in progress).
    DeliveredWithin(Duration),
}

/// A slimmed Shoot, packed, with the version it is at.
struct Entry {
    version: Option<String>,
    /// When the watch delivered it.
    delivered: Instant,
    /// `None` if it did not pack (a `DynamicObject` always serializes): never answered.
    /// Shared so that a read inflates it outside the lock.
    shoot: Option<Arc<Packed>>,
}

#[derive(Default)]
struct Inner {
    shoots: HashMap<Key, Entry>,
    /// The list running now: it replaces `shoots` when complete.
    listing: Option<HashMap<Key, Entry>>,
    /// Shoots this host has seen at a version the cache has not (`None`: unknown, as after
    /// a delete): read from Gardener until the watch delivers that version (or any event
    /// of the Shoot, for `None`).
    ahead: HashMap<Key, Option<String>>,
}

fn key(namespace: &str, name: &str) -> Key {
    format!("{namespace}/{name}").into()
}

fn key_of(shoot: &DynamicObject) -> Key {
    let meta = &shoot.metadata;
    key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

impl ShootCache {
    /// Take one event of the watch of Shoots.
    pub(crate) fn apply(&self, event: &watcher::Event<DynamicObject>) {
        // Packed before the lock: deflating every Shoot of a relist must not stall reads.
        let packed = match event {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => Some(entry(s)),
            _ => None,
        };
        let mut inner = self.inner.lock().expect("shoot cache lock");
        match (event, packed) {
            (watcher::Event::Apply(s), Some(packed)) => {
                inner.shoots.insert(key_of(s), packed);
                caught_up(&mut inner, s);
            }
            (watcher::Event::Delete(s), _) => {
                inner.shoots.remove(&key_of(s));
                caught_up(&mut inner, s);
            }
            (watcher::Event::Init, _) => {
                inner.listing = Some(HashMap::new());
                self.state.send_replace(State::Listing);
            }
            (watcher::Event::InitApply(s), Some(packed)) => {
                let listing = inner.listing.get_or_insert_default();
                listing.insert(key_of(s), packed);
            }
            (watcher::Event::InitDone, _) => {
                inner.shoots = inner.listing.take().unwrap_or_default();
                inner.shoots.shrink_to_fit();
                confirmed_by_list(&mut inner);
                self.state.send_replace(State::Synced);
            }
            // Both are packed above.
            (watcher::Event::Apply(_) | watcher::Event::InitApply(_), None) => {}
        }
    }

    /// The watch failed: the cache answers for nothing until the next complete list.
    pub(crate) fn lost(&self) {
        self.state.send_replace(State::Down);
    }

    /// The Shoot as cached, when the cache may answer for it; `None` means: ask Gardener
    /// (the Shoot may still exist, or exist at a newer version). While the watch lists,
    /// wait for the list up to `patience`: a host just started (or just leading) would
    /// otherwise read every Shoot its first reconciles meet.
    pub(crate) async fn get(
        &self,
        namespace: &str,
        name: &str,
        freshness: Freshness,
        patience: Duration,
    ) -> Option<DynamicObject> {
        let mut state = self.state.subscribe();
        let listed = state.wait_for(|s| *s != State::Listing);
        let _ = tokio::time::timeout(patience, listed).await;
        self.cached(namespace, name, freshness, Instant::now())
    }

    fn cached(
        &self,
        namespace: &str,
        name: &str,
        freshness: Freshness,
        now: Instant,
    ) -> Option<DynamicObject> {
        let key = key(namespace, name);
        let packed = {
            let inner = self.inner.lock().expect("shoot cache lock");
            if *self.state.borrow() != State::Synced || inner.ahead.contains_key(&key) {
                return None;
            }
            let entry = inner.shoots.get(&key)?;
            if let Freshness::DeliveredWithin(age) = freshness
                && now.saturating_duration_since(entry.delivered) > age
            {
                return None;
            }
            entry.shoot.clone()?
        };
        // Packed by `entry` from a `DynamicObject`: reads back unless memory is corrupt;
        // should it not, Gardener is asked.
        packed.unpack()
    }

    /// This host read or wrote `shoot` at its resourceVersion.
    pub(crate) fn saw(&self, shoot: &DynamicObject) {
        let key = key_of(shoot);
        let version = shoot.metadata.resource_version.clone();
        let mut inner = self.inner.lock().expect("shoot cache lock");
        let cached = inner.shoots.get(&key).and_then(|p| p.version.as_ref());
        match version.is_some() && cached == version.as_ref() {
            true => inner.ahead.remove(&key),
            false => inner.ahead.insert(key, version),
        };
    }

    /// This host changed the Shoot at a version it does not know (a delete).
    pub(crate) fn changed(&self, namespace: &str, name: &str) {
        let mut inner = self.inner.lock().expect("shoot cache lock");
        inner.ahead.insert(key(namespace, name), None);
    }

    /// Shoots held (a figure for tests and benchmarks).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().expect("shoot cache lock").shoots.len()
    }

    #[cfg(test)]
    fn is_ahead(&self, name: &str) -> bool {
        let inner = self.inner.lock().expect("shoot cache lock");
        inner.ahead.contains_key(&key("garden-p", name))
    }
}

fn entry(shoot: &DynamicObject) -> Entry {
    let mut shoot = shoot.clone();
    crate::api::slim(&mut shoot);
    Entry {
        version: shoot.metadata.resource_version.clone(),
        delivered: Instant::now(),
        shoot: Packed::of(&shoot).map(Arc::new),
    }
}

/// The watch delivered `shoot`: a version this host was ahead with is caught up with.
fn caught_up(inner: &mut Inner, shoot: &DynamicObject) {
    let key = key_of(shoot);
    let done = match inner.ahead.get(&key) {
        Some(None) => true,
        Some(Some(version)) => shoot.metadata.resource_version.as_ref() == Some(version),
        None => false,
    };
    if done {
        inner.ahead.remove(&key);
    }
}

/// After a complete list: forget what this host was ahead with where the list shows it.
/// The list (`resourceVersion=0`, from the API server's cache) may be older than this
/// host's last write, so an entry it shows at another version stays until the watch
/// delivers that version, or this host's next read from Gardener finds the cache current
/// (`ShootCache::saw`). A Shoot this host found gone and the list does not hold is settled.
fn confirmed_by_list(inner: &mut Inner) {
    let Inner { shoots, ahead, .. } = inner;
    ahead.retain(|key, version| match (version, shoots.get(key)) {
        (None, None) => false,
        (None, Some(_)) => true,
        (Some(version), listed) => listed.and_then(|e| e.version.as_ref()) != Some(version),
    });
    ahead.shrink_to_fit();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gardener::shoot::shoot_resource;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn shoot(name: &str, version: &str) -> DynamicObject {
        let mut s = DynamicObject::new(name, &shoot_resource()).within("garden-p");
        s.metadata.resource_version = Some(version.into());
        s.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("tessera".into()),
            fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {}}))),
            ..ManagedFieldsEntry::default()
        }]);
        s
    }

    fn listed(cache: &ShootCache, shoots: &[DynamicObject]) {
        cache.apply(&watcher::Event::Init);
        for s in shoots {
            cache.apply(&watcher::Event::InitApply(s.clone()));
        }
        cache.apply(&watcher::Event::InitDone);
    }

    fn version(cache: &ShootCache, name: &str) -> Option<String> {
        cache
            .cached("garden-p", name, Freshness::Any, Instant::now())
            .and_then(|s| s.metadata.resource_version)
    }

    #[test]
    fn answers_only_after_a_complete_list_and_not_while_the_watch_is_down() {
        let cache = ShootCache::default();
        cache.apply(&watcher::Event::Init);
        cache.apply(&watcher::Event::InitApply(shoot("a", "1")));
        assert_eq!(version(&cache, "a"), None, "half a list answers nothing");
        cache.apply(&watcher::Event::InitDone);
        assert_eq!(version(&cache, "a").as_deref(), Some("1"));
        cache.lost();
        assert_eq!(version(&cache, "a"), None, "a failed watch answers nothing");
        listed(&cache, &[shoot("a", "2")]);
        assert_eq!(version(&cache, "a").as_deref(), Some("2"));
        assert_eq!(version(&cache, "b"), None);
    }

    #[test]
    fn a_version_this_host_saw_first_is_read_from_gardener_until_the_watch_delivers_it() {
        let cache = ShootCache::default();
        listed(&cache, &[shoot("a", "1")]);
        cache.saw(&shoot("a", "1"));
        assert_eq!(version(&cache, "a").as_deref(), Some("1"), "already cached");
        cache.saw(&shoot("a", "5"));
        assert_eq!(version(&cache, "a"), None, "the cache is behind this host");
        cache.apply(&watcher::Event::Apply(shoot("a", "3")));
        assert_eq!(version(&cache, "a"), None, "still behind");
        cache.apply(&watcher::Event::Apply(shoot("a", "5")));
        assert_eq!(version(&cache, "a").as_deref(), Some("5"));
    }

    #[test]
    fn a_delete_waits_for_any_event_of_the_shoot_and_a_relist_forgets_what_it_shows() {
        let cache = ShootCache::default();
        listed(&cache, &[shoot("a", "1"), shoot("b", "1"), shoot("c", "1")]);
        cache.changed("garden-p", "a");
        cache.saw(&shoot("b", "9"));
        cache.saw(&shoot("c", "4"));
        assert_eq!(version(&cache, "a"), None);
        cache.apply(&watcher::Event::Apply(shoot("a", "2")));
        assert_eq!(version(&cache, "a").as_deref(), Some("2"));
        cache.apply(&watcher::Event::Delete(shoot("a", "3")));
        assert_eq!(version(&cache, "a"), None, "deleted");
        cache.changed("garden-p", "a");
        assert_eq!(version(&cache, "b"), None);
        listed(&cache, &[shoot("b", "10"), shoot("c", "4")]);
        assert_eq!(
            version(&cache, "c").as_deref(),
            Some("4"),
            "the list shows it"
        );
        assert!(!cache.is_ahead("a"), "gone, and the list agrees");
        assert_eq!(cache.len(), 2);
        assert_eq!(
            version(&cache, "b"),
            None,
            "listed at another version: newer, or a stale list from before this host's write"
        );
        cache.saw(&shoot("b", "10"));
        assert_eq!(
            version(&cache, "b").as_deref(),
            Some("10"),
            "Gardener agrees"
        );
    }

    #[test]
    fn a_stale_relist_does_not_hide_this_hosts_write() {
        let cache = ShootCache::default();
        listed(&cache, &[shoot("a", "1")]);
        cache.saw(&shoot("a", "5"));
        listed(&cache, &[shoot("a", "4")]);
        assert_eq!(
            version(&cache, "a"),
            None,
            "the list is older than the write"
        );
        cache.apply(&watcher::Event::Apply(shoot("a", "5")));
        assert_eq!(version(&cache, "a").as_deref(), Some("5"));
    }

    #[test]
    fn a_shoot_in_progress_is_answered_only_while_its_last_delivery_is_recent() {
        let cache = ShootCache::default();
        listed(&cache, &[shoot("a", "1")]);
        let recent = Freshness::DeliveredWithin(Duration::from_secs(30));
        let at = |after: u64| Instant::now() + Duration::from_secs(after);
        let answers = |freshness, now| {
            cache
                .cached("garden-p", "a", freshness, now)
                .and_then(|s| s.metadata.resource_version)
        };
        assert_eq!(answers(recent, at(0)).as_deref(), Some("1"));
        assert_eq!(
            answers(recent, at(31)),
            None,
            "quiet for longer: ask Gardener"
        );
        assert_eq!(answers(Freshness::Any, at(31)).as_deref(), Some("1"));
        cache.apply(&watcher::Event::Apply(shoot("a", "2")));
        assert_eq!(
            answers(recent, at(29)).as_deref(),
            Some("2"),
            "a new event makes it recent again"
        );
    }

    #[tokio::test]
    async fn a_read_waits_for_the_first_list_but_not_for_a_watch_that_is_down() {
        let cache = std::sync::Arc::new(ShootCache::default());
        let patience = std::time::Duration::from_secs(30);
        let listing = cache.clone();
        let lister = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            listed(&listing, &[shoot("a", "1")]);
        });
        let read = cache.get("garden-p", "a", Freshness::Any, patience).await;
        assert_eq!(
            read.and_then(|s| s.metadata.resource_version).as_deref(),
            Some("1")
        );
        lister.await.expect("listed");
        cache.lost();
        let started = std::time::Instant::now();
        assert!(
            cache
                .get("garden-p", "a", Freshness::Any, patience)
                .await
                .is_none()
        );
        assert!(
            started.elapsed() < patience,
            "a watch that is down is not waited for"
        );
    }

    #[test]
    fn keeps_shoots_slimmed() {
        let cache = ShootCache::default();
        listed(&cache, &[shoot("a", "1")]);
        let cached = cache
            .cached("garden-p", "a", Freshness::Any, Instant::now())
            .expect("cached");
        let entries = cached.metadata.managed_fields.expect("managers kept");
        assert_eq!(entries[0].manager.as_deref(), Some("tessera"));
        assert_eq!(entries[0].fields_v1, None);
    }
}
