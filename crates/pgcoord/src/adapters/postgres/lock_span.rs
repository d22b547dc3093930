//! [`lock_span!`]: the span every lock call runs in, with the fields all of
//! them share (OpenTelemetry's database fields, the key, the outcome), so
//! the list is written once; `docs/observability.md` documents it.

/// A DEBUG span `$name` for lock operation `$op` on `$key`, plus the
/// caller's own fields.
macro_rules! lock_span {
    ($name:literal, $op:literal, $key:expr, $($fields:tt)*) => {
        tracing::debug_span!(
            $name,
            "db.system" = "postgresql",
            "db.system.name" = "postgresql",
            "db.operation.name" = $op,
            "otel.name" = concat!("lock ", $op),
            "otel.kind" = "client",
            "eventsource.lock.key" = $key,
            "eventsource.lock.outcome" = tracing::field::Empty,
            $($fields)*
        )
    };
}

pub(crate) use lock_span;
