//! The stored form of a model and the checked form of a query: plumbing for
//! adapter authors, kept out of the main `ports::readmodels` surface.
//!
//! An adapter turns a model into a [`Record`] ([`Record::from_model`]) to
//! write it, and a row back into a model with [`Record::into_model`]; it
//! runs a [`Query`](super::Query) as the [`CheckedQuery`] that
//! [`Query::check`](super::Query::check) returns, whose operands are already
//! converted to the fields' types.

use chrono::SubsecRound;

use super::bounds;
use super::error::ReadModelError;
use super::field::{DefaultValue, FieldDescriptor};
use super::field_type::FieldType;
use super::meta::ReadModelMeta;
use super::model::ReadModel;
use super::value::Value;

pub use super::checked::{CheckedFilter, CheckedOrder, CheckedQuery, DeletedRows};
pub use super::meta::now_micros;
use super::serde_form::short_type_name;
#[doc(hidden)]
pub use super::serde_form::{field_error, from_value_via_serde, value_via_serde};
#[cfg(feature = "sqlite")]
pub(crate) use super::value::decimal_order;

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
    /// 1, a non-nullable field is NULL or missing from the serde form, a
    /// text, decimal or JSON value holds a NUL character (U+0000, which
    /// PostgreSQL cannot store), a float is NaN, a timestamp (bookkeeping
    /// ones included) or date has a year outside 0000–9999 (what SQLite's
    /// text form orders correctly), or a descriptor reuses a base column's
    /// name; `-0.0` is stored as `0.0`. With
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
        let mut values = model.to_values(fields)?;
        if values.len() != fields.len() {
            return Err(ReadModelError::InvalidModel(format!(
                "{}: {} values for {} fields",
                short_type_name::<M>(),
                values.len(),
                fields.len()
            )));
        }
        for (field, value) in fields.iter().zip(values.iter_mut()) {
            if let Some(why) = value.unsupported() {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?}: {why}",
                    short_type_name::<M>(),
                    field.name
                )));
            }
            if let Value::Float(f) = value {
                *f = bounds::normalize_zero(*f);
            }
            if value.is_null() && !field.nullable {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?} is NULL but not nullable",
                    short_type_name::<M>(),
                    field.name
                )));
            }
            if holds_nul(value) {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?} holds a NUL character (U+0000), which PostgreSQL cannot \
                     store in text or JSON",
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
        let stamps = [
            ("created_at", Some(&meta.created_at)),
            ("updated_at", Some(&meta.updated_at)),
            ("deleted_at", meta.deleted_at.as_ref()),
        ];
        for (name, t) in stamps {
            if let Some(why) = t.and_then(bounds::timestamp_out_of_range) {
                return Err(ReadModelError::InvalidModel(format!(
                    "{} {}: {name}: {why}",
                    short_type_name::<M>(),
                    meta.id
                )));
            }
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

/// True when a text-like value holds U+0000, which PostgreSQL refuses in
/// `TEXT` (22021) and `JSONB` (22P05): refused on every backend alike.
fn holds_nul(value: &Value) -> bool {
    fn json(j: &serde_json::Value) -> bool {
        match j {
            serde_json::Value::String(s) => s.contains('\0'),
            serde_json::Value::Array(items) => items.iter().any(json),
            serde_json::Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || json(v)),
            _ => false,
        }
    }
    match value {
        Value::Text(s) | Value::Decimal(s) => s.contains('\0'),
        Value::Json(j) => json(j),
        _ => false,
    }
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

    #[test]
    fn nul_characters_are_refused_as_postgresql_refuses_them() {
        let with = |label: &str| Thing {
            meta: ReadModelMeta::new_random(),
            label: label.into(),
        };
        let text = [FieldDescriptor::of::<String>("label")];
        let err = Record::from_model(&with("a\0b"), &text).unwrap_err();
        assert!(
            matches!(&err, ReadModelError::InvalidModel(m) if m.contains(r#"field "label" holds a NUL"#)),
            "{err}"
        );
        assert!(Record::from_model(&with("a\\u0000b"), &text).is_ok());
        assert!(holds_nul(&Value::Json(
            serde_json::json!({"a": [1, "x\u{0}"]})
        )));
        assert!(holds_nul(&Value::Json(serde_json::json!({"k\u{0}": 1}))));
        assert!(!holds_nul(&Value::Json(serde_json::json!({"a": "x"}))));
        assert!(!holds_nul(&Value::Bytes(vec![0])));
    }
}
