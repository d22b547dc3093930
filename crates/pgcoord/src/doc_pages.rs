//! The user guides, compiled and run as doc tests (`cargo test -p pgcoord
//! --doc`), so that every Rust snippet a reader copies builds. Snippets
//! that need a server are `no_run`: compiled, not run. `docs/readmodels.md`
//! is included by the read-model ports.

/// `README.md`.
#[doc = include_str!("../../../README.md")]
pub struct Readme;

/// `docs/primitives.md`.
#[doc = include_str!("../../../docs/primitives.md")]
pub struct Primitives;

/// `docs/fencing.md`.
#[doc = include_str!("../../../docs/fencing.md")]
pub struct Fencing;

/// `docs/observability.md`.
#[doc = include_str!("../../../docs/observability.md")]
pub struct Observability;

/// `docs/design.md`.
#[doc = include_str!("../../../docs/design.md")]
pub struct Design;

/// `docs/architecture.md`.
#[doc = include_str!("../../../docs/architecture.md")]
pub struct Architecture;

/// `docs/reliability.md`.
#[doc = include_str!("../../../docs/reliability.md")]
pub struct Reliability;

/// `docs/performance.md`.
#[doc = include_str!("../../../docs/performance.md")]
pub struct Performance;

/// `crates/pgcoord/README.md`, the crate's page on crates.io.
#[doc = include_str!("../README.md")]
pub struct CrateReadme;
