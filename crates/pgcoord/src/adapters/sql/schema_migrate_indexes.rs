//! The index statements of a migration beyond `CREATE INDEX IF NOT EXISTS`:
//! dropping the indexes the library made under names it no longer gives
//! them, so that a changed declaration replaces the old index instead of
//! sitting next to it.
//!
//! Only names the library generates are dropped: an unnamed index's name
//! from earlier releases (`idx_{table}_{columns}`), and the generated name
//! of the same columns with the other uniqueness (after `index(x)` became
//! `unique_index(x)`, or back). A name the model still declares is kept.

use super::schema_types::quote_literal;
use super::{quote_ident, Dialect};
use crate::ports::error::Error;
use crate::ports::readmodels::IndexDescriptor;
use crate::ports::sql_state::SqlState;

/// PostgreSQL's identifier limit in bytes: longer names are cut to it.
const PG_MAX_IDENT: usize = 63;

/// `DROP INDEX` statements for the library-made indexes of `table` that
/// `indexes` no longer declare.
pub(super) fn drop_replaced_indexes(
    dialect: Dialect,
    table: &str,
    indexes: &[IndexDescriptor],
) -> Vec<String> {
    let declared: Vec<String> = indexes.iter().map(|i| i.name_on(table)).collect();
    let mut stale: Vec<String> = Vec::new();
    for index in indexes.iter().filter(|i| i.name.is_none()) {
        let mut twin = index.clone();
        twin.unique = !index.unique;
        let candidates = [index.legacy_name_on(table), Some(twin.name_on(table))];
        for name in candidates.into_iter().flatten() {
            let name = match dialect {
                Dialect::Postgres => cut(&name, PG_MAX_IDENT),
                Dialect::Sqlite => name,
            };
            if !declared.contains(&name) && !stale.contains(&name) {
                stale.push(name);
            }
        }
    }
    stale
        .iter()
        .map(|name| drop_index(dialect, table, name))
        .collect()
}

/// A schema statement's failure, explained when it is a unique index that
/// cannot be built because rows already share its key (SQLSTATE 23505 on
/// PostgreSQL, `SQLITE_CONSTRAINT` on SQLite; no row is written by DDL, so
/// that is the only way these arise).
pub fn explain_schema_error(table: &str, e: Error) -> Error {
    match e {
        Error::Backend(b)
            if b.code().is_some_and(|c| {
                *c == SqlState::UNIQUE_VIOLATION || c.code() == "SQLITE_CONSTRAINT"
            }) =>
        {
            Error::Backend(b.in_context(&format!(
                "a unique index on {table:?} cannot be created: existing rows (soft-deleted \
                 ones included) have duplicate keys; remove the duplicates, then migrate again"
            )))
        }
        other => other,
    }
}

/// `name` cut to `max` bytes at a character boundary, as PostgreSQL cuts
/// an identifier that is too long.
fn cut(name: &str, max: usize) -> String {
    let mut end = name.len().min(max);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// Drops the index `name` when it is on `table`. SQLite has no conditional
/// DDL: there the index is dropped by name whatever its table (an index of
/// another table made under the same ambiguous old name is re-created by
/// that table's own migration).
fn drop_index(dialect: Dialect, table: &str, name: &str) -> String {
    match dialect {
        Dialect::Sqlite => format!("DROP INDEX IF EXISTS {}", quote_ident(name)),
        Dialect::Postgres => format!(
            "DO $pgcoord$ DECLARE q text; BEGIN \
             SELECT format('DROP INDEX %I.%I', n.nspname, c.relname) INTO q \
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE i.indrelid = to_regclass({}) AND c.relname = {}; \
             IF q IS NOT NULL THEN EXECUTE q; END IF; END $pgcoord$",
            quote_literal(&quote_ident(table)),
            quote_literal(name)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_uniqueness_drops_the_old_generated_and_legacy_names() {
        let now = [IndexDescriptor::on(["email"]).unique()];
        let lite = drop_replaced_indexes(Dialect::Sqlite, "t", &now);
        let plain = IndexDescriptor::on(["email"]).name_on("t");
        assert_eq!(
            lite,
            [
                r#"DROP INDEX IF EXISTS "idx_t_email""#.to_owned(),
                format!("DROP INDEX IF EXISTS \"{plain}\""),
            ]
        );
        // Both declared: nothing of theirs is dropped.
        let both = [
            IndexDescriptor::on(["email"]),
            IndexDescriptor::on(["email"]).unique(),
        ];
        assert_eq!(drop_replaced_indexes(Dialect::Sqlite, "t", &both).len(), 1);
        let pg = drop_replaced_indexes(Dialect::Postgres, "t", &now);
        assert!(pg[0].contains("to_regclass('\"t\"')") && pg[0].contains("'idx_t_email'"));
        // A named index is the user's: none of its names is dropped.
        let named = [IndexDescriptor::on(["email"]).named("idx_t_email")];
        assert!(drop_replaced_indexes(Dialect::Sqlite, "t", &named).is_empty());
    }
}
