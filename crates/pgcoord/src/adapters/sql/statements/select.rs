//! The reading statements of [`SqlTable`]: by id, by ids, `exists`, and
//! checked queries (`find`, `count`) with the NULL semantics spelled out.

use uuid::Uuid;

use super::{collated, compared, placeholder, Builder, Param, SqlTable, Statement};
use crate::adapters::sql::{quote_ident, Dialect};
use crate::ports::readmodels::storage::{CheckedFilter, CheckedQuery, DeletedRows};
use crate::ports::readmodels::{Direction, FieldType, Operand, Operator, Value};

impl SqlTable {
    /// `SELECT` of one row by id, with a soft-delete policy.
    pub fn get(&self, id: Uuid, deleted: DeletedRows) -> Statement {
        Statement {
            sql: self.hot.get[deleted as usize].clone(),
            params: vec![Param {
                value: Value::Uuid(id),
                field_type: FieldType::Uuid,
            }],
        }
    }

    /// The text of [`SqlTable::get`], built once per table.
    pub(super) fn get_text(&self, deleted: DeletedRows) -> String {
        let mut sql = format!(
            "SELECT {} FROM {} WHERE \"id\" = {}",
            self.select_list,
            self.quoted_table(),
            placeholder(self.dialect, 1, &FieldType::Uuid)
        );
        if let Some(cond) = Self::deleted_condition(deleted) {
            sql.push_str(" AND ");
            sql.push_str(cond);
        }
        sql
    }

    /// `SELECT` of the live rows among `ids` (in no particular order).
    pub fn get_many(&self, ids: &[Uuid]) -> Statement {
        let mut b = self.builder();
        b.push(&format!(
            "SELECT {} FROM {} WHERE \"id\" IN (",
            self.select_list,
            self.quoted_table()
        ));
        if ids.is_empty() {
            b.push("NULL");
        }
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                b.push(", ");
            }
            let p = b.bind(Value::Uuid(*id), &FieldType::Uuid);
            b.push(&p);
        }
        b.push(r#") AND "deleted_at" IS NULL"#);
        b.finish()
    }

    /// `SELECT 1` when a live row has the id.
    pub fn exists(&self, id: Uuid) -> Statement {
        let mut b = self.builder();
        b.push(&format!(
            "SELECT 1 FROM {} WHERE \"id\" = ",
            self.quoted_table()
        ));
        let p = b.bind(Value::Uuid(id), &FieldType::Uuid);
        b.push(&p);
        b.push(r#" AND "deleted_at" IS NULL"#);
        b.finish()
    }

    fn push_where(&self, b: &mut Builder, query: &CheckedQuery) {
        let mut conditions: Vec<String> = Vec::new();
        if let Some(cond) = Self::deleted_condition(query.deleted) {
            conditions.push(cond.to_owned());
        }
        for filter in &query.filters {
            conditions.push(self.condition(b, filter));
        }
        if !conditions.is_empty() {
            b.push(" WHERE ");
            b.push(&conditions.join(" AND "));
        }
    }

    /// One filter as SQL with the documented NULL semantics.
    fn condition(&self, b: &mut Builder, filter: &CheckedFilter) -> String {
        let plain = compared(
            self.dialect,
            quote_ident(&filter.column),
            &filter.field_type,
        );
        let ordered = collated(
            self.dialect,
            quote_ident(&filter.column),
            &filter.field_type,
        );
        let ty = &filter.field_type;
        match (&filter.operand, filter.operator) {
            (Operand::One(v), op) => {
                let p = b.bind_compared(v.clone(), ty);
                match op {
                    Operator::Eq => format!("{plain} = {p}"),
                    Operator::Ne => format!("({plain} IS NULL OR {plain} <> {p})"),
                    Operator::Gt => format!("{ordered} > {p}"),
                    Operator::Gte => format!("{ordered} >= {p}"),
                    Operator::Lt => format!("{ordered} < {p}"),
                    Operator::Lte => format!("{ordered} <= {p}"),
                    // `Query::check` pairs list operators with lists only.
                    Operator::In | Operator::NotIn => "1 = 0".to_owned(),
                }
            }
            (Operand::Many(values), op) => {
                if values.is_empty() {
                    return match op {
                        Operator::NotIn => "1 = 1".to_owned(),
                        _ => "1 = 0".to_owned(),
                    };
                }
                let list: Vec<String> = values
                    .iter()
                    .map(|v| b.bind_compared(v.clone(), ty))
                    .collect();
                let list = list.join(", ");
                match op {
                    Operator::In => format!("{plain} IN ({list})"),
                    Operator::NotIn => format!("({plain} IS NULL OR {plain} NOT IN ({list}))"),
                    _ => "1 = 0".to_owned(),
                }
            }
        }
    }

    /// The rows a query returns, ordered and paged.
    pub fn find(&self, query: &CheckedQuery) -> Statement {
        let mut b = self.builder();
        b.push(&format!(
            "SELECT {} FROM {}",
            self.select_list,
            self.quoted_table()
        ));
        self.push_where(&mut b, query);
        b.push(" ORDER BY ");
        if let Some(order) = &query.order {
            // Table-qualified: a bare name in PostgreSQL's ORDER BY would
            // mean the select list's (re-typed) output column.
            let column = format!("{}.{}", self.quoted_table(), quote_ident(&order.column));
            let key = collated(self.dialect, column, &order.field_type);
            b.push(&match order.direction {
                Direction::Asc => format!("{key} ASC NULLS LAST, "),
                Direction::Desc => format!("{key} DESC NULLS FIRST, "),
            });
        }
        b.push(&format!(r#"{}."id" ASC"#, self.quoted_table()));
        let clamp = |n: u64| n.min(i64::MAX as u64);
        match (query.limit, self.dialect) {
            (Some(limit), _) => b.push(&format!(" LIMIT {}", clamp(limit))),
            (None, Dialect::Sqlite) if query.offset > 0 => b.push(" LIMIT -1"),
            (None, _) => {}
        }
        if query.offset > 0 {
            b.push(&format!(" OFFSET {}", clamp(query.offset)));
        }
        b.finish()
    }

    /// `SELECT COUNT(*)` of the rows a query matches (limit and offset
    /// ignored).
    pub fn count(&self, query: &CheckedQuery) -> Statement {
        let mut b = self.builder();
        b.push(&format!("SELECT COUNT(*) FROM {}", self.quoted_table()));
        self.push_where(&mut b, query);
        b.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::readmodels::FieldDescriptor;
    use crate::ports::readmodels::{Filter, Query};

    fn table(dialect: Dialect) -> SqlTable {
        SqlTable::new(
            dialect,
            "items",
            vec![
                FieldDescriptor::new("name", FieldType::Text),
                FieldDescriptor::new("qty", FieldType::Integer).nullable(),
            ],
        )
    }

    #[test]
    fn null_semantics_are_spelled_out_in_sql() {
        let t = table(Dialect::Postgres);
        let q = Query::new()
            .filter(Filter::ne("qty", 1))
            .filter(Filter::not_in("qty", [1, 2]))
            .filter(Filter::is_in("name", Vec::<String>::new()))
            .filter(Filter::gt("name", "m"))
            .order_by("qty", Direction::Desc)
            .limit(5)
            .offset(10);
        let stmt = t.find(&q.check(t.fields()).unwrap());
        assert!(
            stmt.sql.contains(r#"("qty" IS NULL OR "qty" <> $1::int8)"#),
            "{}",
            stmt.sql
        );
        assert!(stmt
            .sql
            .contains(r#"("qty" IS NULL OR "qty" NOT IN ($2::int8, $3::int8))"#));
        assert!(stmt.sql.contains("1 = 0"));
        assert!(stmt.sql.contains(r#""name"::text COLLATE "C" > $4::text"#));
        assert!(stmt.sql.ends_with(
            r#"ORDER BY "items"."qty" DESC NULLS FIRST, "items"."id" ASC LIMIT 5 OFFSET 10"#
        ));
        assert_eq!(stmt.params.len(), 4);

        let lite = table(Dialect::Sqlite);
        let stmt = lite.find(&Query::new().offset(3).check(lite.fields()).unwrap());
        assert!(
            stmt.sql.ends_with(
                r#"WHERE "deleted_at" IS NULL ORDER BY "items"."id" ASC LIMIT -1 OFFSET 3"#
            ),
            "{}",
            stmt.sql
        );
    }
}
