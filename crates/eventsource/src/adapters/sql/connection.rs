//! The connection factory: a [`Database`] from a `postgres://` or
//! `sqlite://` URL.
