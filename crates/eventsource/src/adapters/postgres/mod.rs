//! PostgreSQL adapters.
