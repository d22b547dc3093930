//! Schema generation for read-model tables: DDL for PostgreSQL and SQLite
//! from a model's field descriptors, and additive migrations.
//!
//! Pure string building: nothing here talks to a database. The adapters'
//! `create_schema` / `migrate_schema` methods run what this produces.
//!
//! ```
//! use pgcoord::readmodels::{schema, Dialect};
//! # use pgcoord::readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta};
//! # #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
//! # struct Category { #[serde(flatten)] meta: ReadModelMeta, name: String }
//! # impl ReadModel for Category {
//! #     fn fields() -> Vec<FieldDescriptor> { vec![FieldDescriptor::new("name", FieldType::Text)] }
//! #     fn meta(&self) -> &ReadModelMeta { &self.meta }
//! #     fn meta_mut(&mut self) -> &mut ReadModelMeta { &mut self.meta }
//! # }
//! let ddl = schema::full_schema::<Category>(Dialect::Postgres);
//! assert!(ddl.contains(r#"CREATE TABLE IF NOT EXISTS "categories""#));
//! assert!(ddl.contains(r#""name" TEXT NOT NULL"#));
//! assert!(ddl.contains(r#"WHERE "deleted_at" IS NULL"#));
//! ```

use crate::ports::readmodels::storage::base_fields;
use crate::ports::readmodels::{FieldDescriptor, IndexDescriptor, ReadModel, ReadModelError};

use super::schema_migrate_indexes::drop_replaced_indexes;
pub use super::schema_migrate_indexes::explain_schema_error;
pub use super::schema_types::{
    column_type, default_literal, postgres_type, quote_literal, sqlite_type,
};
use super::{quote_ident, Dialect};

/// One column definition: `"name" TYPE [NOT NULL] [DEFAULT ...]`.
pub fn column_definition(dialect: Dialect, field: &FieldDescriptor) -> String {
    let mut def = format!(
        "{} {}",
        quote_ident(&field.name),
        column_type(dialect, field)
    );
    if field.name == "id" {
        def.push_str(" PRIMARY KEY");
        return def;
    }
    if !field.nullable {
        def.push_str(" NOT NULL");
    }
    if let Some(default) = &field.default {
        def.push_str(" DEFAULT ");
        def.push_str(&default_literal(dialect, default));
    }
    def
}

/// `CREATE TABLE IF NOT EXISTS` for a table with the base columns followed
/// by `fields`.
pub fn create_table(dialect: Dialect, table: &str, fields: &[FieldDescriptor]) -> String {
    let columns: Vec<String> = base_fields()
        .iter()
        .chain(fields)
        .map(|f| format!("    {}", column_definition(dialect, f)))
        .collect();
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n{}\n)",
        quote_ident(table),
        columns.join(",\n")
    )
}

/// The `CREATE TABLE` statement of a model.
pub fn generate_schema<M: ReadModel>(dialect: Dialect) -> String {
    create_table(dialect, &M::table_name(), &M::fields())
}

/// `CREATE INDEX IF NOT EXISTS` statements: always one on `deleted_at`
/// (partial, `WHERE "deleted_at" IS NULL`, on PostgreSQL), then the
/// declared ones (their `postgres_where` applied on PostgreSQL only).
pub fn create_indexes(dialect: Dialect, table: &str, indexes: &[IndexDescriptor]) -> Vec<String> {
    // Named as ever: one per table, so the name needs no hash.
    let mut deleted = IndexDescriptor::on(["deleted_at"]).named(format!("idx_{table}_deleted_at"));
    if dialect == Dialect::Postgres {
        deleted = deleted.postgres_where(r#""deleted_at" IS NULL"#);
    }
    std::iter::once(&deleted)
        .chain(indexes)
        .map(|index| {
            let name = index.name_on(table);
            let columns: Vec<String> = index.columns.iter().map(|c| quote_ident(c)).collect();
            let mut sql = format!(
                "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
                if index.unique { "UNIQUE " } else { "" },
                quote_ident(&name),
                quote_ident(table),
                columns.join(", ")
            );
            if let (Dialect::Postgres, Some(predicate)) = (dialect, &index.postgres_where) {
                sql.push_str(" WHERE ");
                sql.push_str(predicate);
            }
            sql
        })
        .collect()
}

/// The index statements of a model.
pub fn generate_indexes<M: ReadModel>(dialect: Dialect) -> Vec<String> {
    create_indexes(dialect, &M::table_name(), &M::indexes())
}

/// The table and its indexes as one script (statements end with `;`).
pub fn full_schema<M: ReadModel>(dialect: Dialect) -> String {
    let mut script = generate_schema::<M>(dialect);
    script.push_str(";\n");
    for index in generate_indexes::<M>(dialect) {
        script.push_str(&index);
        script.push_str(";\n");
    }
    script
}

/// The statements that bring an existing table (with `existing_columns`) up
/// to `fields`: one `ALTER TABLE ... ADD COLUMN` per missing column (base
/// columns included), then the index statements. Columns are only ever
/// added; extra existing columns are left alone. Indexes the library made
/// under names it no longer gives them (an earlier release's
/// `idx_{table}_{columns}`, or the same columns with the other uniqueness)
/// are dropped before the declared ones are created. Existing names match as
/// the backend matches identifiers: exactly on PostgreSQL (the generator
/// quotes them), ASCII case-insensitively on SQLite.
///
/// Fails with [`ReadModelError::SchemaMismatch`] when the table has no `id`
/// column, or when a missing column is NOT NULL without a default (existing
/// rows would have no value for it).
pub fn migration(
    dialect: Dialect,
    table: &str,
    fields: &[FieldDescriptor],
    indexes: &[IndexDescriptor],
    existing_columns: &[String],
) -> Result<Vec<String>, ReadModelError> {
    // PostgreSQL compares quoted identifiers exactly; SQLite folds ASCII
    // case whether quoted or not, so `Label` already is `label` there.
    let has = |name: &str| {
        existing_columns.iter().any(|c| match dialect {
            Dialect::Postgres => c == name,
            Dialect::Sqlite => c.eq_ignore_ascii_case(name),
        })
    };
    if !has("id") {
        return Err(ReadModelError::schema_mismatch(
            table.to_owned(),
            "id".to_owned(),
            "the table has no id column; it cannot be migrated in place".to_owned(),
        ));
    }
    let mut statements = Vec::new();
    for field in base_fields().iter().chain(fields) {
        if has(&field.name) {
            continue;
        }
        if !field.nullable && field.default.is_none() {
            return Err(ReadModelError::schema_mismatch(
                table.to_owned(),
                field.name.clone(),
                "a new NOT NULL column needs a default for the existing rows".to_owned(),
            ));
        }
        statements.push(format!(
            "ALTER TABLE {} ADD COLUMN {}",
            quote_ident(table),
            column_definition(dialect, field)
        ));
    }
    for column in leftover_columns(dialect, fields, existing_columns) {
        tracing::warn!(
            table,
            column = column.as_str(),
            "the table has a column the model no longer declares; it is left in place. \
             If it is NOT NULL without a default, every save will fail: drop the column \
             or give it a default"
        );
    }
    statements.extend(drop_replaced_indexes(dialect, table, indexes));
    statements.extend(create_indexes(dialect, table, indexes));
    Ok(statements)
}

/// The columns of `existing_columns` that neither the base columns nor
/// `fields` declare (matched as [`migration`] matches names): columns of a
/// removed or renamed field. [`migration`] leaves them in place and logs a
/// warning for each; one that is NOT NULL without a default makes every
/// save fail. Types are not compared: a field whose type changed keeps its
/// old column type.
pub fn leftover_columns(
    dialect: Dialect,
    fields: &[FieldDescriptor],
    existing_columns: &[String],
) -> Vec<String> {
    let declared = |c: &str| {
        base_fields().iter().chain(fields).any(|f| match dialect {
            Dialect::Postgres => f.name == c,
            Dialect::Sqlite => f.name.eq_ignore_ascii_case(c),
        })
    };
    existing_columns
        .iter()
        .filter(|c| !declared(c))
        .cloned()
        .collect()
}

/// [`migration`] for a model.
pub fn generate_migration<M: ReadModel>(
    dialect: Dialect,
    existing_columns: &[String],
) -> Result<Vec<String>, ReadModelError> {
    migration(
        dialect,
        &M::table_name(),
        &M::fields(),
        &M::indexes(),
        existing_columns,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::readmodels::{DefaultValue, FieldType};

    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("name", FieldType::Text)
                .with_default(DefaultValue::Text("it's".into())),
            FieldDescriptor::new("active", FieldType::Bool).with_default(DefaultValue::Bool(true)),
            FieldDescriptor::new("ratio", FieldType::Float).nullable(),
            FieldDescriptor::new("price", FieldType::Decimal).with_postgres_type("NUMERIC(12,2)"),
            FieldDescriptor::new("code", FieldType::Text).with_sql_type("VARCHAR(8)"),
            FieldDescriptor::new("kind", FieldType::Other("Kind".into())).nullable(),
        ]
    }

    #[test]
    fn type_maps_cover_every_type() {
        let all = [
            (FieldType::Uuid, "UUID", "TEXT"),
            (FieldType::Text, "TEXT", "TEXT"),
            (FieldType::Integer, "BIGINT", "INTEGER"),
            (FieldType::Float, "DOUBLE PRECISION", "REAL"),
            (FieldType::Decimal, "NUMERIC", "TEXT"),
            (FieldType::Bool, "BOOLEAN", "INTEGER"),
            (FieldType::Timestamp, "TIMESTAMPTZ", "TEXT"),
            (FieldType::Date, "DATE", "TEXT"),
            (FieldType::Json, "JSONB", "TEXT"),
            (FieldType::Bytes, "BYTEA", "BLOB"),
            (FieldType::Other("X".into()), "TEXT", "TEXT"),
        ];
        for (ty, pg, lite) in all {
            assert_eq!(postgres_type(&ty), pg);
            assert_eq!(sqlite_type(&ty), lite);
        }
    }

    #[test]
    fn create_table_has_base_columns_defaults_and_overrides() {
        let pg = create_table(Dialect::Postgres, "things", &fields());
        assert!(
            pg.starts_with(r#"CREATE TABLE IF NOT EXISTS "things" ("#),
            "{pg}"
        );
        for part in [
            r#""id" UUID PRIMARY KEY"#,
            r#""created_at" TIMESTAMPTZ NOT NULL"#,
            r#""updated_at" TIMESTAMPTZ NOT NULL"#,
            r#""version" BIGINT NOT NULL DEFAULT 1"#,
            r#""deleted_at" TIMESTAMPTZ,"#,
            r#""name" TEXT NOT NULL DEFAULT 'it''s'"#,
            r#""active" BOOLEAN NOT NULL DEFAULT TRUE"#,
            r#""ratio" DOUBLE PRECISION,"#,
            r#""price" NUMERIC(12,2) NOT NULL"#,
            r#""code" VARCHAR(8) NOT NULL"#,
            r#""kind" TEXT"#,
        ] {
            assert!(pg.contains(part), "missing {part} in {pg}");
        }
        let lite = create_table(Dialect::Sqlite, "things", &fields());
        for part in [
            r#""id" TEXT PRIMARY KEY"#,
            r#""active" INTEGER NOT NULL DEFAULT 1"#,
            r#""price" TEXT NOT NULL"#,
            r#""code" VARCHAR(8) NOT NULL"#,
            r#""ratio" REAL,"#,
        ] {
            assert!(lite.contains(part), "missing {part} in {lite}");
        }
        assert_eq!(
            default_literal(Dialect::Sqlite, &DefaultValue::Bool(false)),
            "0"
        );
        assert_eq!(
            default_literal(Dialect::Postgres, &DefaultValue::Bool(false)),
            "FALSE"
        );
        assert_eq!(
            default_literal(Dialect::Postgres, &DefaultValue::Float(2.0)),
            "2.0"
        );
    }

    #[test]
    fn indexes_are_partial_on_postgres_only() {
        let declared = [
            IndexDescriptor::on(["name", "active"]).postgres_where(r#""active""#),
            IndexDescriptor::on(["code"])
                .unique()
                .named("things_code_key"),
        ];
        let pg = create_indexes(Dialect::Postgres, "things", &declared);
        assert_eq!(
            pg[0],
            r#"CREATE INDEX IF NOT EXISTS "idx_things_deleted_at" ON "things" ("deleted_at") WHERE "deleted_at" IS NULL"#
        );
        let name = declared[0].name_on("things");
        assert!(name.starts_with("idx_things_name_active_"), "{name}");
        assert_eq!(
            pg[1],
            format!(
                r#"CREATE INDEX IF NOT EXISTS "{name}" ON "things" ("name", "active") WHERE "active""#
            )
        );
        assert_eq!(
            pg[2],
            r#"CREATE UNIQUE INDEX IF NOT EXISTS "things_code_key" ON "things" ("code")"#
        );
        let lite = create_indexes(Dialect::Sqlite, "things", &declared);
        assert_eq!(
            lite[0],
            r#"CREATE INDEX IF NOT EXISTS "idx_things_deleted_at" ON "things" ("deleted_at")"#
        );
        assert!(!lite[1].contains("WHERE"));
    }

    #[test]
    fn migration_adds_columns_and_refuses_impossible_ones() {
        let existing: Vec<String> = [
            "id",
            "created_at",
            "updated_at",
            "version",
            "deleted_at",
            "name",
        ]
        .map(String::from)
        .to_vec();
        let with_new = vec![
            FieldDescriptor::new("name", FieldType::Text),
            FieldDescriptor::new("note", FieldType::Text).nullable(),
            FieldDescriptor::new("flag", FieldType::Bool).with_default(DefaultValue::Bool(false)),
        ];
        let stmts = migration(Dialect::Postgres, "things", &with_new, &[], &existing).unwrap();
        assert_eq!(stmts[0], r#"ALTER TABLE "things" ADD COLUMN "note" TEXT"#);
        assert_eq!(
            stmts[1],
            r#"ALTER TABLE "things" ADD COLUMN "flag" BOOLEAN NOT NULL DEFAULT FALSE"#
        );
        assert_eq!(stmts.len(), 3, "plus the deleted_at index: {stmts:?}");

        let mut with_legacy = existing.clone();
        with_legacy.extend(["legacy".to_owned(), "NAME".to_owned()]);
        assert_eq!(
            leftover_columns(Dialect::Sqlite, &with_new, &with_legacy),
            ["legacy"]
        );
        assert_eq!(
            leftover_columns(Dialect::Postgres, &with_new, &with_legacy),
            ["legacy", "NAME"]
        );

        let bad = vec![FieldDescriptor::new("must", FieldType::Integer)];
        match migration(Dialect::Sqlite, "things", &bad, &[], &existing) {
            Err(ReadModelError::SchemaMismatch { table, column, .. }) => {
                assert_eq!((table.as_str(), column.as_str()), ("things", "must"));
            }
            other => panic!("expected a schema mismatch, got {other:?}"),
        }
        match migration(Dialect::Sqlite, "things", &with_new, &[], &["name".into()]) {
            Err(ReadModelError::SchemaMismatch { column, .. }) => assert_eq!(column, "id"),
            other => panic!("expected a schema mismatch, got {other:?}"),
        }
    }
}
