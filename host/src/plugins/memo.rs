//! Plugins are pure functions of their input, so a render need not run a step whose input
//! it has seen before. Every step's draft is remembered under a key that hashes everything
//! it came from: the Runtime, the current Shoot, the operation, and for every step up to it
//! the component digest, configuration, limits and granted paths. A render looks for the
//! last step whose draft is known and runs only the steps after it: an unchanged Runtime
//! runs nothing, a rollout of one plugin re-runs that plugin and those after it.
//!
//! Memory is bounded by two generations: new and used drafts go to the young one; when it
//! holds half the budget, the old generation is dropped and the young one becomes old. What
//! was not used during a whole generation is forgotten, which approximates least recently
//! used at O(1) per operation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::packed::Packed;

/// A content hash.
pub type Key = [u8; 32];

/// The draft after a step, with every warning of the steps up to it. The draft is kept as
/// its JSON text, deflated (`crate::packed`), and parsed on a hit: charged exactly
/// (charging a parsed draft by an estimate let a 64 MiB budget hold 156 MiB at 1,000
/// Runtimes, docs/performance.md), and about a third of the text's size, so a budget holds
/// nearly three times the drafts it held as text.
#[derive(Debug)]
pub struct Memo {
    /// `None` if the draft did not serialize (no JSON value fails to): a miss on every hit.
    draft: Option<Packed>,
    /// (plugin, warning)
    pub warnings: Vec<(String, String)>,
    /// What the entry is charged against the budget.
    bytes: usize,
}

/// What an entry costs besides its text: the key in its map slot, the `Arc`, the boxes.
const ENTRY_OVERHEAD: usize = 128;

impl Memo {
    pub fn new(shoot: &Value, warnings: Vec<(String, String)>) -> Self {
        let draft = Packed::of(shoot);
        let bytes = ENTRY_OVERHEAD
            + draft.as_ref().map_or(0, Packed::len)
            + warnings
                .iter()
                .map(|(p, w)| p.len() + w.len() + 48)
                .sum::<usize>();
        Self {
            draft,
            warnings,
            bytes,
        }
    }

    /// The draft, parsed again; `None` if it does not parse (then the render runs the steps).
    pub fn shoot(&self) -> Option<Value> {
        self.draft.as_ref()?.unpack()
    }
}

#[derive(Default)]
struct Generations {
    young: HashMap<Key, Arc<Memo>>,
    old: HashMap<Key, Arc<Memo>>,
    young_bytes: usize,
    old_bytes: usize,
}

/// Drafts by content hash, bounded by an approximate byte budget ([`weight`]).
pub struct DraftCache {
    generations: Mutex<Generations>,
    budget: usize,
}

impl std::fmt::Debug for DraftCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraftCache")
            .field("budget", &self.budget)
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl DraftCache {
    /// A cache holding about `budget` bytes of drafts.
    pub fn new(budget: usize) -> Self {
        Self {
            generations: Mutex::default(),
            budget,
        }
    }

    /// The draft stored under `key`; a hit in the old generation moves it to the young one.
    pub fn get(&self, key: &Key) -> Option<Arc<Memo>> {
        let mut g = self.generations.lock().expect("draft cache lock");
        if let Some(memo) = g.young.get(key) {
            return Some(memo.clone());
        }
        let memo = g.old.remove(key)?;
        g.old_bytes -= memo.bytes;
        g.admit(*key, memo.clone(), self.budget);
        Some(memo)
    }

    /// Mark the drafts under `keys` as used, so that they age with the one they led to.
    pub fn touch(&self, keys: &[Key]) {
        let mut g = self.generations.lock().expect("draft cache lock");
        for key in keys {
            if let Some(memo) = g.old.remove(key) {
                g.old_bytes -= memo.bytes;
                g.admit(*key, memo, self.budget);
            }
        }
    }

    /// Remember `memo` under `key`.
    pub fn put(&self, key: Key, memo: Memo) {
        if memo.bytes > self.budget / 2 {
            return;
        }
        let mut g = self.generations.lock().expect("draft cache lock");
        g.admit(key, Arc::new(memo), self.budget);
    }

    /// Bytes held now (both generations).
    pub fn bytes(&self) -> usize {
        let g = self.generations.lock().expect("draft cache lock");
        g.young_bytes + g.old_bytes
    }

    /// Entries held now (both generations).
    pub fn len(&self) -> usize {
        let g = self.generations.lock().expect("draft cache lock");
        g.young.len() + g.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Generations {
    fn admit(&mut self, key: Key, memo: Arc<Memo>, budget: usize) {
        if let Some(previous) = self.young.remove(&key) {
            self.young_bytes -= previous.bytes;
        }
        if self.young_bytes + memo.bytes > budget / 2 {
            self.old = std::mem::take(&mut self.young);
            self.old_bytes = std::mem::take(&mut self.young_bytes);
        }
        self.young_bytes += memo.bytes;
        self.young.insert(key, memo);
    }
}

/// Hash `parts` in order, each length-prefixed so that no two lists of parts collide.
pub fn key_of(parts: &[&[u8]]) -> Key {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(n: usize) -> Memo {
        // 128 + a few bytes of packed digits, 4 + 48 for the warning.
        Memo::new(&Value::from(n + 10), vec![("p".into(), "w".repeat(3))])
    }

    #[test]
    fn keys_do_not_collide_across_part_boundaries() {
        assert_ne!(key_of(&[b"ab", b"c"]), key_of(&[b"a", b"bc"]));
        assert_eq!(key_of(&[b"ab", b"c"]), key_of(&[b"ab", b"c"]));
    }

    #[test]
    fn stays_within_its_budget_and_keeps_what_is_used() {
        let cache = DraftCache::new(1820);
        cache.put(key_of(&[b"kept"]), memo(0));
        for i in 0..100u32 {
            cache.put(key_of(&[&i.to_le_bytes()]), memo(i as usize));
            assert!(cache.bytes() <= 1820, "{} bytes", cache.bytes());
            assert!(
                cache.get(&key_of(&[b"kept"])).is_some(),
                "a draft used in every generation is lost after {i} inserts"
            );
        }
        assert!(cache.get(&key_of(&[&0u32.to_le_bytes()])).is_none());
        assert_eq!(
            cache.get(&key_of(&[&99u32.to_le_bytes()])).unwrap().shoot(),
            Some(Value::from(109))
        );
    }

    #[test]
    fn a_draft_is_charged_its_packed_text() {
        let shoot = serde_json::json!({"spec": {"region": "eu-central-1", "workers": [1, 2]}});
        let packed = Packed::of(&shoot).unwrap().len();
        let memo = Memo::new(&shoot, Vec::new());
        assert_eq!(memo.bytes, ENTRY_OVERHEAD + packed);
        assert_eq!(memo.shoot(), Some(shoot));
    }

    #[test]
    fn a_draft_larger_than_half_the_budget_is_not_kept() {
        let cache = DraftCache::new(300);
        cache.put(key_of(&[b"big"]), memo(1));
        assert!(cache.is_empty());
    }
}
