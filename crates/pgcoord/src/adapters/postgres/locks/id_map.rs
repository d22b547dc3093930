//! [`IdMap`] and [`IdSet`]: the engine's maps and sets keyed by lock id or
//! serial, on foldhash's seeded hasher instead of SipHash.
//!
//! Every acquisition and release looks lock ids up several times (the
//! book, the session's held set, the wait lines); SipHash made that about
//! 2% of the client's CPU at 1,024 tasks. Lock ids are SHA-256-derived and
//! the hasher is seeded per process, so a caller choosing keys cannot aim
//! them at one bucket.

use std::collections::{HashMap, HashSet};

/// A map keyed by lock id (or another integer of the engine).
pub(crate) type IdMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A set of lock ids.
pub(crate) type IdSet<K> = HashSet<K, foldhash::fast::RandomState>;
