//! Derives that compile, checked through the generated descriptors and
//! conversions: raw identifiers name their columns without `r#`, and
//! `Option<T>` with a `sql_type` converts as `T` with the same attribute.

use pgcoord::readmodels::{FieldType, ReadModel, ReadModelMeta, Value};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Status {
    Open,
    Closed,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, ReadModel)]
#[read_model(index(r#type))]
struct Event {
    #[serde(flatten)]
    meta: ReadModelMeta,
    r#type: String,
    r#match: Option<i64>,
    #[column(sql_type = "TEXT")]
    status: Option<Status>,
    #[column(sql_type = "TEXT")]
    plain: Status,
}

#[test]
fn raw_identifiers_are_stored_under_their_plain_names() {
    let names: Vec<String> = Event::fields().into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["type", "match", "status", "plain"]);
    assert_eq!(Event::TYPE.name(), "type");
    assert_eq!(Event::MATCH.name(), "match");
    assert_eq!(Event::indexes()[0].columns, ["type"]);
}

impl Event {
    fn sample(status: Option<Status>) -> Self {
        Self {
            meta: ReadModelMeta::new_random(),
            r#type: "a".into(),
            r#match: Some(1),
            status,
            plain: Status::Closed,
        }
    }
}

#[test]
fn an_optional_enum_with_a_sql_type_is_a_nullable_serde_column() {
    let fields = Event::fields();
    let (status, plain) = (&fields[2], &fields[3]);
    assert_eq!(status.field_type, FieldType::Other("Status".into()));
    assert_eq!(status.field_type, plain.field_type);
    assert!(status.nullable && !plain.nullable);
    for value in [Some(Status::Open), None] {
        let model = Event::sample(value.clone());
        let values = model.to_values(&fields).unwrap();
        let expected = match &value {
            Some(_) => Value::Text("Open".into()),
            None => Value::Null,
        };
        assert_eq!(values[2], expected);
        let back = Event::from_values(model.meta.clone(), values, &fields).unwrap();
        assert_eq!(back, model);
    }
}
