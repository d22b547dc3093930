//! [`LockMode`]: how a lock is held, exclusive or shared.

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LockMode {
    /// One holder at a time, excluding every other holder of either mode.
    #[default]
    Exclusive,
    /// Shared with other shared holders; excludes exclusive holders.
    Shared,
}

impl LockMode {
    /// `"exclusive"` or `"shared"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Exclusive => "exclusive",
            LockMode::Shared => "shared",
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
