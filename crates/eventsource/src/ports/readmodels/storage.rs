//! The stored form of a model and the checked form of a query: plumbing for
//! adapter authors, kept out of the main `ports::readmodels` surface.
//!
//! An adapter turns a model into a [`Record`] ([`Record::from_model`]) to
//! write it, and a row back into a model with [`Record::into_model`]; it
//! runs a [`Query`](super::Query) as the [`CheckedQuery`] that
//! [`Query::check`](super::Query::check) returns, whose operands are already
//! converted to the fields' types.

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};

use super::error::ReadModelError;
use super::field::{DefaultValue, FieldDescriptor, FieldType};
use super::meta::ReadModelMeta;
use super::model::ReadModel;
use super::value::Value;

pub use super::query::{CheckedFilter, CheckedOrder, CheckedQuery, DeletedRows};

/// The current time, truncated to microseconds (the precision every backend
/// stores).
pub fn now_micros() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// The base columns every read-model table has, in table order.
pub const BASE_COLUMNS: [&str; 5] = ["id", "created_at", "updated_at", "version", "deleted_at"];

/// The descriptors of the base columns (`id` first).
pub fn base_fields() -> Vec<FieldDescriptor> {
    vec![
        FieldDescriptor::new("id", FieldType::Uuid),
        FieldDescriptor::new("created_at", FieldType::Timestamp),
        FieldDescriptor::new("updated_at", FieldType::Timestamp),
        FieldDescriptor::new("version", FieldType::Integer).with_default(DefaultValue::Integer(1)),
        FieldDescriptor::new("deleted_at", FieldType::Timestamp).nullable(),
    ]
}

/// A model in its stored form: the bookkeeping plus one [`Value`] per user
/// field, in [`ReadModel::fields`] order. What every adapter stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The bookkeeping columns.
    pub meta: ReadModelMeta,
    /// One value per user field, in descriptor order.
    pub values: Vec<Value>,
}

impl Record {
    /// Splits `model` into its stored form ([`ReadModel::to_values`]),
    /// checking every value against its descriptor. Timestamps are
    /// truncated to microseconds.
    ///
    /// Fails with [`ReadModelError::InvalidModel`] when the version is below
    /// 1, a non-nullable field is NULL or missing from the serde form, or a
    /// descriptor reuses a base column's name; with
    /// [`ReadModelError::Serialization`] when a value cannot be converted.
    pub fn from_model<M: ReadModel>(
        model: &M,
        fields: &[FieldDescriptor],
    ) -> Result<Self, ReadModelError> {
        if let Some(field) = fields
            .iter()
            .find(|f| BASE_COLUMNS.contains(&f.name.as_str()))
        {
            return Err(ReadModelError::InvalidModel(format!(
                "{}: field {:?} collides with a base column",
                short_type_name::<M>(),
                field.name
            )));
        }
        let values = model.to_values(fields)?;
        if values.len() != fields.len() {
            return Err(ReadModelError::InvalidModel(format!(
                "{}: {} values for {} fields",
                short_type_name::<M>(),
                values.len(),
                fields.len()
            )));
        }
        for (field, value) in fields.iter().zip(&values) {
            if value.is_null() && !field.nullable {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?} is NULL but not nullable",
                    short_type_name::<M>(),
                    field.name
                )));
            }
        }
        let mut meta = model.meta().clone();
        if meta.version < 1 {
            return Err(ReadModelError::InvalidModel(format!(
                "{} {}: version {} is below 1",
                short_type_name::<M>(),
                meta.id,
                meta.version
            )));
        }
        meta.created_at = meta.created_at.trunc_subsecs(6);
        meta.updated_at = meta.updated_at.trunc_subsecs(6);
        meta.deleted_at = meta.deleted_at.map(|t| t.trunc_subsecs(6));
        Ok(Self { meta, values })
    }

    /// Rebuilds a model from its stored form ([`ReadModel::from_values`]).
    pub fn into_model<M: ReadModel>(self, fields: &[FieldDescriptor]) -> Result<M, ReadModelError> {
        M::from_values(self.meta, self.values, fields)
    }

    /// [`Record::into_model`] on a copy.
    pub fn to_model<M: ReadModel>(&self, fields: &[FieldDescriptor]) -> Result<M, ReadModelError> {
        self.clone().into_model(fields)
    }

    /// The value of the column `name`: a base column or a user field.
    pub fn column(&self, name: &str, fields: &[FieldDescriptor]) -> Option<Value> {
        match name {
            "id" => Some(Value::Uuid(self.meta.id)),
            "created_at" => Some(Value::Timestamp(self.meta.created_at)),
            "updated_at" => Some(Value::Timestamp(self.meta.updated_at)),
            "version" => Some(Value::Integer(self.meta.version)),
            "deleted_at" => Some(self.meta.deleted_at.map_or(Value::Null, Value::Timestamp)),
            _ => fields
                .iter()
                .position(|f| f.name == name)
                .map(|i| self.values[i].clone()),
        }
    }
}

/// [`ReadModel::to_values`] through the serde form.
pub(crate) fn values_via_serde<M: ReadModel>(
    model: &M,
    fields: &[FieldDescriptor],
) -> Result<Vec<Value>, ReadModelError> {
    let json = serde_json::to_value(model).map_err(serde_err::<M>)?;
    let serde_json::Value::Object(map) = json else {
        return Err(ser_err::<M>(
            "the model must serialise as a JSON object".into(),
        ));
    };
    let mut values = Vec::with_capacity(fields.len());
    for field in fields {
        let raw = match map.get(&field.name) {
            Some(raw) => raw,
            None if field.nullable => &serde_json::Value::Null,
            None => {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: described field {:?} is missing from the serde form",
                    short_type_name::<M>(),
                    field.name
                )))
            }
        };
        let value = Value::from_json(raw, &field.field_type)
            .map_err(|reason| ser_err::<M>(format!("field {:?}: {reason}", field.name)))?;
        values.push(value);
    }
    Ok(values)
}

/// [`ReadModel::from_values`] through the serde form.
pub(crate) fn model_via_serde<M: ReadModel>(
    meta: ReadModelMeta,
    values: Vec<Value>,
    fields: &[FieldDescriptor],
) -> Result<M, ReadModelError> {
    let mut map = match serde_json::to_value(&meta) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => return Err(ser_err::<M>("cannot serialise the base columns".into())),
    };
    for (field, value) in fields.iter().zip(&values) {
        map.insert(field.name.clone(), value.to_json());
    }
    let mut model: M =
        serde_json::from_value(serde_json::Value::Object(map)).map_err(serde_err::<M>)?;
    *model.meta_mut() = meta;
    Ok(model)
}

/// A field's stored value through its serde form. For generated code
/// (fields with an explicit `kind` or a type without `FieldKind`).
#[doc(hidden)]
pub fn value_via_serde<T: serde::Serialize>(value: &T, ty: &FieldType) -> Result<Value, String> {
    let json = serde_json::to_value(value).map_err(|e| e.to_string())?;
    Value::from_json(&json, ty)
}

/// A field rebuilt from its stored value through its serde form. For
/// generated code.
#[doc(hidden)]
pub fn from_value_via_serde<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value.to_json()).map_err(|e| e.to_string())
}

/// The error for a field the derive's direct conversion could not read
/// back. For generated code.
#[doc(hidden)]
pub fn field_error<M>(field: &str, reason: String) -> ReadModelError {
    ser_err::<M>(format!("field {field:?}: {reason}"))
}

fn ser_err<M>(reason: String) -> ReadModelError {
    ReadModelError::Serialization {
        model: short_type_name::<M>(),
        reason,
        source: None,
    }
}

fn serde_err<M>(e: serde_json::Error) -> ReadModelError {
    ReadModelError::Serialization {
        model: short_type_name::<M>(),
        reason: e.to_string(),
        source: Some(Box::new(e)),
    }
}

fn short_type_name<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Parses a `YYYY-MM-DD` date. For adapters.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Thing {
        #[serde(flatten)]
        meta: ReadModelMeta,
        label: String,
    }

    impl ReadModel for Thing {
        fn fields() -> Vec<FieldDescriptor> {
            vec![FieldDescriptor::of::<String>("label")]
        }
        fn meta(&self) -> &ReadModelMeta {
            &self.meta
        }
        fn meta_mut(&mut self) -> &mut ReadModelMeta {
            &mut self.meta
        }
    }

    #[test]
    fn records_check_models_against_their_descriptors() {
        let thing = Thing {
            meta: ReadModelMeta::new_random(),
            label: "x".into(),
        };
        let record = Record::from_model(&thing, &Thing::fields()).unwrap();
        assert_eq!(record.values, vec![Value::Text("x".into())]);
        let back: Thing = record.to_model(&Thing::fields()).unwrap();
        assert_eq!(
            (back.meta, back.label),
            (thing.meta.clone(), thing.label.clone())
        );

        let invalid = |fields: Vec<FieldDescriptor>| {
            matches!(
                Record::from_model(&thing, &fields),
                Err(ReadModelError::InvalidModel(_))
            )
        };
        assert!(invalid(vec![FieldDescriptor::of::<String>("missing")]));
        assert!(invalid(vec![FieldDescriptor::of::<i64>("version")]));
        assert!(
            Record::from_model(&thing, &[FieldDescriptor::of::<Option<String>>("missing")]).is_ok()
        );
        assert!(matches!(
            Record::from_model(&thing, &[FieldDescriptor::of::<i64>("label")]),
            Err(ReadModelError::Serialization { .. })
        ));
    }
}
