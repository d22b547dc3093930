//! Binding parameters and decoding columns for the PostgreSQL repository.

use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, Utc};
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::adapters::sql::{Param, SqlTable, Statement};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::storage::Record;
use crate::ports::readmodels::{FieldType, ReadModelError, Value};

/// The parameters with their PostgreSQL types, for `query_typed`.
pub(super) fn typed_params<'p>(
    params: &'p [PgParam<'_>],
    stmt: &Statement,
) -> Vec<(&'p (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .zip(&stmt.params)
        .map(|(p, param)| (p as &(dyn ToSql + Sync), pg_type(&param.field_type)))
        .collect()
}

/// A row (columns in [`SqlTable::columns`] order) as a record.
pub(super) fn decode_row(table: &SqlTable, row: &Row) -> Result<Record> {
    let columns = table.columns();
    let mut values = Vec::with_capacity(columns.len());
    for (i, field) in columns.iter().enumerate() {
        values.push(decode_value(row, i, &field.field_type).map_err(|e| {
            Error::from(ReadModelError::SchemaMismatch {
                table: table.table().to_owned(),
                column: field.name.clone(),
                reason: e.to_string(),
                source: Some(Box::new(e)),
            })
        })?);
    }
    table.record_from_row(values).ok_or_else(|| {
        ReadModelError::schema_mismatch(
            table.table(),
            "id",
            "a base column holds an unexpected value",
        )
        .into()
    })
}

/// A parameter bound by reference, with the type its placeholder's cast
/// expects: no copy of its value, no allocation.
#[derive(Debug)]
pub(super) struct PgParam<'a>(&'a Param);

impl ToSql for PgParam<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let v = &self.0.value;
        match (&self.0.field_type, v) {
            (_, Value::Null) => Ok(IsNull::Yes),
            (FieldType::Uuid, Value::Uuid(u)) => u.to_sql(ty, out),
            (
                FieldType::Text | FieldType::Other(_) | FieldType::Decimal,
                Value::Text(s) | Value::Decimal(s),
            ) => s.as_str().to_sql(ty, out),
            (FieldType::Integer, Value::Integer(i)) => i.to_sql(ty, out),
            (FieldType::Float, Value::Float(f)) => f.to_sql(ty, out),
            (FieldType::Float, Value::Integer(i)) => (*i as f64).to_sql(ty, out),
            (FieldType::Bool, Value::Bool(b)) => b.to_sql(ty, out),
            (FieldType::Timestamp, Value::Timestamp(t)) => t.to_sql(ty, out),
            (FieldType::Date, Value::Date(d)) => d.to_sql(ty, out),
            (FieldType::Json, Value::Json(j)) => j.to_sql(ty, out),
            (FieldType::Bytes, Value::Bytes(b)) => b.as_slice().to_sql(ty, out),
            // `Query::check` and the stored form only pair values with
            // their field's type; anything else binds as NULL, as before.
            _ => Ok(IsNull::Yes),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// The statement's parameters, bound by reference.
pub(super) fn bind(stmt: &Statement) -> Vec<PgParam<'_>> {
    stmt.params.iter().map(PgParam).collect()
}

/// The PostgreSQL type of a parameter (matching its placeholder's cast).
fn pg_type(field_type: &FieldType) -> Type {
    match field_type {
        FieldType::Uuid => Type::UUID,
        FieldType::Text | FieldType::Other(_) | FieldType::Decimal => Type::TEXT,
        FieldType::Integer => Type::INT8,
        FieldType::Float => Type::FLOAT8,
        FieldType::Bool => Type::BOOL,
        FieldType::Timestamp => Type::TIMESTAMPTZ,
        FieldType::Date => Type::DATE,
        FieldType::Json => Type::JSONB,
        FieldType::Bytes => Type::BYTEA,
    }
}

fn decode_value(
    row: &Row,
    i: usize,
    ty: &FieldType,
) -> std::result::Result<Value, tokio_postgres::Error> {
    fn or_null<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
        v.map_or(Value::Null, f)
    }
    Ok(match ty {
        FieldType::Uuid => or_null(row.try_get::<_, Option<Uuid>>(i)?, Value::Uuid),
        FieldType::Text | FieldType::Other(_) => {
            or_null(row.try_get::<_, Option<String>>(i)?, Value::Text)
        }
        FieldType::Decimal => or_null(row.try_get::<_, Option<String>>(i)?, Value::Decimal),
        FieldType::Integer => or_null(row.try_get::<_, Option<i64>>(i)?, Value::Integer),
        FieldType::Float => or_null(row.try_get::<_, Option<f64>>(i)?, Value::Float),
        FieldType::Bool => or_null(row.try_get::<_, Option<bool>>(i)?, Value::Bool),
        FieldType::Timestamp => or_null(
            row.try_get::<_, Option<DateTime<Utc>>>(i)?,
            Value::Timestamp,
        ),
        FieldType::Date => or_null(row.try_get::<_, Option<NaiveDate>>(i)?, Value::Date),
        FieldType::Json => or_null(row.try_get::<_, Option<serde_json::Value>>(i)?, Value::Json),
        FieldType::Bytes => or_null(row.try_get::<_, Option<Vec<u8>>>(i)?, Value::Bytes),
    })
}
