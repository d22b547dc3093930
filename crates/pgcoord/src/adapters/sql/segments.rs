//! Segments of a projection: [`Segment`] (one of a fixed number of slices
//! of the events, by the partition hash of their key), [`partition_hash`]
//! and [`SegmentFeed`], the feed of one segment's events.

use std::fmt;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{EventFeed, FeedSignal};

/// The most segments a projection may be split into.
pub const MAX_SEGMENTS: u32 = 1024;

/// The partition hash of a key: the first 8 bytes of its SHA-256 digest
/// (of the key's UTF-8 bytes), read as a big-endian `u64`.
///
/// Stable across processes, hosts, versions and languages (it is a
/// published digest, not Rust's randomly seeded `RandomState`): every
/// runner of a projection puts a key in the same segment, and so does a
/// runner of a later version. The event of key `k` belongs to segment
/// `partition_hash(k) % count`.
///
/// ```
/// use pgcoord::readmodels::{partition_hash, Segment};
///
/// assert_eq!(partition_hash("order-17"), partition_hash("order-17"));
/// let segment = Segment::of_key("order-17", 4).unwrap();
/// assert_eq!(u64::from(segment.index()), partition_hash("order-17") % 4);
/// ```
pub fn partition_hash(key: &str) -> u64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// Segment `index` of `count`: the events whose partition key hashes to
/// `index` modulo `count` (see [`partition_hash`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    index: u32,
    count: u32,
}

impl Segment {
    /// Segment `index` of `count` (1 to [`MAX_SEGMENTS`] segments; `index`
    /// below `count`).
    pub fn new(index: u32, count: u32) -> Result<Self> {
        check_count(count)?;
        if index >= count {
            return Err(Error::InvalidArgument(format!(
                "segment {index} of {count}: the index must be below the count"
            )));
        }
        Ok(Self { index, count })
    }

    /// The segment of `count` that events of partition key `key` belong to.
    pub fn of_key(key: &str, count: u32) -> Result<Self> {
        check_count(count)?;
        let index = (partition_hash(key) % u64::from(count)) as u32;
        Ok(Self { index, count })
    }

    /// The segment's index, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many segments the projection has.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether events of partition key `key` belong to this segment.
    pub fn holds(&self, key: &str) -> bool {
        partition_hash(key) % u64::from(self.count) == u64::from(self.index)
    }

    /// The projection name of this segment of projection `base`:
    /// `{base}/segment-{index}-of-{count}`. It names the segment's
    /// checkpoint and its runner lock (`projection:{name}`).
    pub fn projection_name(&self, base: &str) -> String {
        format!("{base}/segment-{}-of-{}", self.index, self.count)
    }

    /// This segment's view of `feed`: its events only, by `key`.
    pub fn feed<F: EventFeed>(&self, feed: F, key: fn(&F::Event) -> String) -> SegmentFeed<F> {
        SegmentFeed {
            inner: feed,
            segment: *self,
            key,
            clear: Mutex::new(None),
        }
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "segment {} of {}", self.index, self.count)
    }
}

fn check_count(count: u32) -> Result<()> {
    if count == 0 || count > MAX_SEGMENTS {
        return Err(Error::InvalidArgument(format!(
            "{count} segments: a projection has 1 to {MAX_SEGMENTS}"
        )));
    }
    Ok(())
}

/// The events of one [`Segment`] of a feed, in the feed's order.
///
/// It reads the whole feed and keeps the events whose key's partition hash
/// falls in its segment, reading on past other segments' events until it
/// has a batch or the feed has nothing more, so a batch is never empty
/// while the segment has events further on. It remembers (in memory) the
/// stretch after its last event in which it found none of its own, so a
/// caught-up segment reads only what is new; after a restart it scans from
/// its checkpoint again. Each segment reads every event of the feed: with
/// `N` segments the feed is read `N` times over.
///
/// Its [`signal`](EventFeed::signal) and [`head`](EventFeed::head) are
/// the feed's (the lag a segment reports is the feed's head minus its
/// checkpoint, an upper bound).
pub struct SegmentFeed<F: EventFeed> {
    inner: F,
    segment: Segment,
    key: fn(&F::Event) -> String,
    /// `(after, upto)`: the feed has no event of this segment in
    /// `(after, upto]`.
    clear: Mutex<Option<(Option<i64>, i64)>>,
}

impl<F: EventFeed> SegmentFeed<F> {
    /// The segment read.
    pub fn segment(&self) -> Segment {
        self.segment
    }

    /// The whole feed.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    fn clear(&self) -> std::sync::MutexGuard<'_, Option<(Option<i64>, i64)>> {
        // One assignment at a time; a panic cannot leave it torn.
        self.clear.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<F: EventFeed> EventFeed for SegmentFeed<F> {
    type Event = F::Event;

    /// Cancel safe: reads (the remembered stretch only ever describes what
    /// was read).
    async fn read_after(&self, after: Option<i64>, limit: usize) -> Result<Vec<(i64, F::Event)>> {
        let limit = limit.max(1);
        let mut cursor = after;
        if let Some((from, upto)) = *self.clear() {
            // No event of this segment in (from, upto], so none in (after, upto].
            if from <= after && Some(upto) > after {
                cursor = Some(upto);
            }
        }
        // Read enough of the whole feed at a time to fill about one batch.
        let wide = limit
            .saturating_mul(self.segment.count as usize)
            .min(10_000);
        let mut out = Vec::new();
        'scan: loop {
            let batch = self.inner.read_after(cursor, wide).await?;
            let full = batch.len() >= wide;
            for (position, event) in batch {
                cursor = Some(position);
                if self.segment.holds(&(self.key)(&event)) {
                    out.push((position, event));
                    if out.len() >= limit {
                        break 'scan;
                    }
                }
            }
            if !full {
                break;
            }
        }
        let last_own = out.last().map(|(p, _)| *p).or(after);
        *self.clear() = cursor
            .filter(|c| Some(*c) > last_own)
            .map(|c| (last_own, c));
        Ok(out)
    }

    /// The feed's event at `position` when it is this segment's (the
    /// remembered stretch is left alone).
    async fn read_at(&self, position: i64) -> Result<Option<F::Event>> {
        let event = self.inner.read_at(position).await?;
        Ok(event.filter(|e| self.segment.holds(&(self.key)(e))))
    }

    fn signal(&self) -> Option<FeedSignal> {
        self.inner.signal()
    }

    async fn head(&self) -> Result<Option<i64>> {
        self.inner.head().await
    }
}

impl<F: EventFeed> fmt::Debug for SegmentFeed<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentFeed")
            .field("segment", &self.segment)
            .field("feed", &std::any::type_name::<F>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_published_digest() {
        // SHA-256("order-17") starts with these 8 bytes, on every platform.
        let digest = Sha256::digest(b"order-17");
        let want = u64::from_be_bytes(digest[..8].try_into().unwrap());
        assert_eq!(partition_hash("order-17"), want);
        assert_eq!(partition_hash(""), 0xe3b0_c442_98fc_1c14);
    }

    #[test]
    fn bad_counts_and_indices_are_refused() {
        assert!(Segment::new(0, 0).is_err());
        assert!(Segment::new(4, 4).is_err());
        assert!(Segment::new(0, MAX_SEGMENTS + 1).is_err());
        assert!(Segment::of_key("k", 0).is_err());
        let s = Segment::new(3, 4).unwrap();
        assert_eq!(s.projection_name("seen"), "seen/segment-3-of-4");
    }

    #[test]
    fn every_key_is_in_exactly_one_segment() {
        for k in 0..200 {
            let key = format!("agg-{k}");
            let owners = (0..5)
                .filter(|i| Segment::new(*i, 5).unwrap().holds(&key))
                .count();
            assert_eq!(owners, 1, "{key}");
        }
    }
}
