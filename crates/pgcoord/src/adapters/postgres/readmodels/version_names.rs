//! The names of a read model's versioned tables and their indexes: version
//! `N` of table `t` is `t_vN` while it is built (or after it was switched
//! away from); the version readers see is always `t`.

use crate::adapters::sql::{quote_ident, schema, Dialect};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{FieldDescriptor, IndexDescriptor};

/// PostgreSQL's identifier limit, in bytes (longer names are truncated,
/// which could make two versions' names collide).
const MAX_IDENT: usize = 63;

/// The table of `version` of `table` when it is not the current one.
pub(super) fn version_table(table: &str, version: u32) -> Result<String> {
    checked(format!("{table}_v{version}"))
}

fn checked(name: String) -> Result<String> {
    if name.len() > MAX_IDENT {
        return Err(Error::InvalidArgument(format!(
            "the versioned name {name:?} is longer than PostgreSQL's {MAX_IDENT} bytes: \
             use a shorter table or index name to rebuild"
        )));
    }
    Ok(name)
}

/// One index of the model under its two names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IndexNames {
    /// Its name on the table readers see.
    pub live: String,
    /// Its name on the version's table while that is built.
    pub building: String,
    /// Its name on the table of the version switched away from.
    pub retired: String,
}

/// The names of the model's indexes (the `deleted_at` one first, as
/// [`schema::create_indexes`] makes them) for the switch to `building`
/// from `retired`.
pub(super) fn index_names(
    table: &str,
    indexes: &[IndexDescriptor],
    building: u32,
    retired: u32,
) -> Result<Vec<IndexNames>> {
    let deleted = IndexNames {
        live: format!("idx_{table}_deleted_at"),
        building: format!("idx_{}_deleted_at", version_table(table, building)?),
        retired: checked(format!("idx_{table}_deleted_at_v{retired}"))?,
    };
    let mut names = vec![deleted];
    for index in indexes {
        let live = live_index_name(table, index);
        names.push(IndexNames {
            building: checked(format!("{live}_v{building}"))?,
            retired: checked(format!("{live}_v{retired}"))?,
            live,
        });
    }
    Ok(names)
}

fn live_index_name(table: &str, index: &IndexDescriptor) -> String {
    index.name_on(table)
}

/// The script creating `version`'s table and indexes (when missing), with
/// index names of their own (an index name is unique per schema).
pub(super) fn version_schema(
    table: &str,
    version: u32,
    fields: &[FieldDescriptor],
    indexes: &[IndexDescriptor],
) -> Result<String> {
    let versioned = version_table(table, version)?;
    let renamed: Vec<IndexDescriptor> = indexes
        .iter()
        .map(|index| {
            let name = checked(format!("{}_v{version}", live_index_name(table, index)))?;
            Ok(index.clone().named(name))
        })
        .collect::<Result<_>>()?;
    let mut script = schema::create_table(Dialect::Postgres, &versioned, fields);
    script.push_str(";\n");
    for statement in schema::create_indexes(Dialect::Postgres, &versioned, &renamed) {
        script.push_str(&statement);
        script.push_str(";\n");
    }
    Ok(script)
}

/// `ALTER INDEX IF EXISTS from RENAME TO to`.
pub(super) fn rename_index(from: &str, to: &str) -> String {
    format!(
        "ALTER INDEX IF EXISTS {} RENAME TO {}",
        quote_ident(from),
        quote_ident(to)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::readmodels::FieldType;

    #[test]
    fn a_version_names_its_table_and_every_index_apart_from_the_live_ones() {
        let indexes = [
            IndexDescriptor::on(["name"]),
            IndexDescriptor::on(["code"])
                .unique()
                .named("things_code_key"),
        ];
        let script = version_schema(
            "things",
            2,
            &[FieldDescriptor::new("name", FieldType::Text)],
            &indexes,
        )
        .unwrap();
        assert!(script.contains(r#"CREATE TABLE IF NOT EXISTS "things_v2""#));
        assert!(script.contains(r#""idx_things_v2_deleted_at" ON "things_v2""#));
        let name = indexes[0].name_on("things");
        assert!(script.contains(&format!(r#""{name}_v2" ON "things_v2""#)));
        assert!(script.contains(r#""things_code_key_v2" ON "things_v2""#));
        let names = index_names("things", &indexes, 2, 1).unwrap();
        let building: Vec<&str> = names.iter().map(|n| n.building.as_str()).collect();
        assert_eq!(
            building,
            [
                "idx_things_v2_deleted_at",
                &format!("{name}_v2"),
                "things_code_key_v2"
            ]
        );
        assert_eq!(names[2].live, "things_code_key");
        assert_eq!(names[2].retired, "things_code_key_v1");
    }

    #[test]
    fn a_name_past_the_identifier_limit_is_refused() {
        let long = "t".repeat(61);
        let err = version_table(&long, 12).unwrap_err();
        assert!(err.to_string().contains("63 bytes"), "{err}");
    }
}
