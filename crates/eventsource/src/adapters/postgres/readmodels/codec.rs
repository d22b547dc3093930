//! Binding parameters and decoding columns for the PostgreSQL repository.

use chrono::{DateTime, NaiveDate, Utc};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::adapters::sql::{Param, SqlTable, Statement};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::storage::Record;
use crate::ports::readmodels::{FieldType, ReadModelError, Value};

/// The parameters with their PostgreSQL types, for `query_typed`.
pub(super) fn typed_params<'p>(
    params: &'p [BoxedParam],
    stmt: &Statement,
) -> Vec<(&'p (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .zip(&stmt.params)
        .map(|(p, param)| (&**p as &(dyn ToSql + Sync), pg_type(&param.field_type)))
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

pub(super) type BoxedParam = Box<dyn ToSql + Sync + Send>;

/// Binds each parameter with the Rust type its placeholder's cast expects.
pub(super) fn bind(stmt: &Statement) -> Vec<BoxedParam> {
    stmt.params.iter().map(bind_one).collect()
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

fn bind_one(param: &Param) -> BoxedParam {
    fn opt<T: ToSql + Sync + Send + 'static>(v: Option<T>) -> BoxedParam {
        Box::new(v)
    }
    let v = &param.value;
    match &param.field_type {
        FieldType::Uuid => opt(match v {
            Value::Uuid(u) => Some(*u),
            _ => None,
        }),
        FieldType::Text | FieldType::Other(_) | FieldType::Decimal => opt(match v {
            Value::Text(s) | Value::Decimal(s) => Some(s.clone()),
            _ => None,
        }),
        FieldType::Integer => opt(match v {
            Value::Integer(i) => Some(*i),
            _ => None,
        }),
        FieldType::Float => opt(match v {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        }),
        FieldType::Bool => opt(match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        }),
        FieldType::Timestamp => opt(match v {
            Value::Timestamp(t) => Some(*t),
            _ => None,
        }),
        FieldType::Date => opt(match v {
            Value::Date(d) => Some(*d),
            _ => None,
        }),
        FieldType::Json => opt(match v {
            Value::Json(j) => Some(j.clone()),
            _ => None,
        }),
        FieldType::Bytes => opt(match v {
            Value::Bytes(b) => Some(b.clone()),
            _ => None,
        }),
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
