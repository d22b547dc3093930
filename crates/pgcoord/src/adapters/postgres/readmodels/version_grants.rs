//! The privileges a rebuilt version takes over from the table it replaces:
//! without them a role that could read (or, for a live runner under its
//! own role, write) the table readers see would lose it at the switch.

use tokio_postgres::GenericClient;

use super::source::query_error;
use crate::adapters::sql::quote_ident;
use crate::ports::error::Result;

/// The table's and its columns' grants (`aclexplode` of `relacl` and
/// `attacl`), except those of the new table's owner (who has them all):
/// grantee (already quoted, or `PUBLIC`), privilege, the column (quoted)
/// for a column grant, and whether it carries the grant option. Column
/// grants only for columns the new table has (a rebuild may follow a
/// change of the model).
const GRANTS: &str = r#"
WITH old AS (SELECT c.oid, c.relacl FROM pg_class c WHERE c.oid = to_regclass($1)),
     new AS (SELECT c.oid, c.relowner FROM pg_class c WHERE c.oid = to_regclass($2)),
     acl AS (
         SELECT a.grantee, a.privilege_type, NULL::name AS col, a.is_grantable
         FROM old CROSS JOIN LATERAL aclexplode(old.relacl) a
         UNION ALL
         SELECT a.grantee, a.privilege_type, att.attname, a.is_grantable
         FROM old
         JOIN pg_attribute att ON att.attrelid = old.oid AND att.attnum > 0 AND NOT att.attisdropped
         CROSS JOIN LATERAL aclexplode(att.attacl) a
         WHERE EXISTS (SELECT 1 FROM new JOIN pg_attribute n ON n.attrelid = new.oid
                       WHERE n.attname = att.attname AND n.attnum > 0 AND NOT n.attisdropped)
     )
SELECT CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END,
       acl.privilege_type, quote_ident(acl.col), acl.is_grantable
FROM acl CROSS JOIN new
LEFT JOIN pg_roles r ON r.oid = acl.grantee
WHERE acl.grantee <> new.relowner AND (acl.grantee = 0 OR r.rolname IS NOT NULL)
ORDER BY 1, 3 NULLS FIRST, 2"#;

/// The `GRANT` statements giving `to` the privileges `from` has (each
/// ending in `;\n`; empty when `from` has only its owner's).
pub(super) async fn copied_grants<C: GenericClient + Sync>(
    c: &C,
    from: &str,
    to: &str,
) -> Result<String> {
    let rows = c
        .query(GRANTS, &[&quote_ident(from), &quote_ident(to)])
        .await
        .map_err(query_error)?;
    let target = quote_ident(to);
    Ok(rows
        .iter()
        .map(|row| {
            let grantee: String = row.get(0);
            let privilege: String = row.get(1);
            let column: Option<String> = row.get(2);
            let option = if row.get::<_, bool>(3) {
                " WITH GRANT OPTION"
            } else {
                ""
            };
            let column = column.map(|c| format!(" ({c})")).unwrap_or_default();
            format!("GRANT {privilege}{column} ON TABLE {target} TO {grantee}{option};\n")
        })
        .collect())
}
