//! [`FencedError`]: a protected write refused because its fencing token is
//! no longer the key's current one.

/// A write carried a fencing token that is not the key's current one: a
/// later holder has taken the lock since (or the key was never fenced).
///
/// The write was refused inside the writer's transaction, so nothing it
/// did there may be committed; roll back and stop acting as the holder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.key, .token, .current))]
pub struct FencedError {
    /// The key whose fence was checked.
    pub key: String,
    /// The token the writer presented.
    pub token: u64,
    /// The key's current token; `None` when the key has never been
    /// acquired with fencing (or the fence row was removed).
    pub current: Option<u64>,
}

fn describe(key: &str, token: &u64, current: &Option<u64>) -> String {
    match current {
        Some(c) if c > token => format!(
            "write under lock {key:?} refused: fencing token {token} is stale, a later holder has \
             token {c}"
        ),
        Some(c) => format!(
            "write under lock {key:?} refused: fencing token {token} is not the current token {c}"
        ),
        None => format!(
            "write under lock {key:?} refused: fencing token {token} was never issued for this key"
        ),
    }
}
