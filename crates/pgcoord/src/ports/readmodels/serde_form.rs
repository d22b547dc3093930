//! Models and fields through their serde form: the default conversions of
//! [`ReadModel`](super::ReadModel) and the helpers the derive's generated
//! code calls. Generic over serde only, so the model trait can use it.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::ReadModelError;
use super::field::FieldDescriptor;
use super::field_type::FieldType;
use super::meta::ReadModelMeta;
use super::value::Value;

/// [`ReadModel::to_values`](super::ReadModel::to_values) through the serde form.
pub(crate) fn values_via_serde<M: Serialize>(
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

/// [`ReadModel::from_values`](super::ReadModel::from_values) through the
/// serde form; `meta_mut` is the model's
/// [`ReadModel::meta_mut`](super::ReadModel::meta_mut).
pub(crate) fn model_via_serde<M: DeserializeOwned>(
    meta: ReadModelMeta,
    values: Vec<Value>,
    fields: &[FieldDescriptor],
    meta_mut: fn(&mut M) -> &mut ReadModelMeta,
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
    *meta_mut(&mut model) = meta;
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

pub(super) fn short_type_name<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}
