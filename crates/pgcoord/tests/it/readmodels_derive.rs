//! `#[derive(ReadModel)]`: the descriptors, table names, indexes and column
//! constants it generates, and its direct conversions, checked against the
//! hand-written equivalents and through a repository.

use chrono::{DateTime, NaiveDate, Utc};
use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{
    default_table_name, DefaultValue, FieldDescriptor, FieldType, Filter, IndexDescriptor, Query,
    ReadModel, ReadModelMeta, ReadModelRepository,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Status {
    Open,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
#[read_model(
    index(status, customer),
    unique_index(email, name = "orders_by_email"),
    index(total, where = "status <> 'Closed'")
)]
struct OrderSummary {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    customer: String,
    email: String,
    #[column(sql_type = "VARCHAR(16)", default = "Open")]
    status: Status,
    #[column(rename = "total_cents", default = 0)]
    total: i64,
    #[column(kind = "decimal")]
    amount: Option<String>,
    note: Option<String>,
    ratio: f32,
    paid: bool,
    owner: Option<Uuid>,
    due: Option<DateTime<Utc>>,
    day: NaiveDate,
    tags: serde_json::Value,
    blob: Vec<u8>,
    small: i16,
    #[column(sql_type_postgres = "CITEXT", sql_type_sqlite = "TEXT COLLATE NOCASE")]
    nick: String,
    #[column(default_sql = "CURRENT_TIMESTAMP", nullable)]
    seen: Option<DateTime<Utc>>,
    #[serde(skip)]
    #[column(skip)]
    cache: Option<u8>,
}

fn order() -> OrderSummary {
    OrderSummary {
        meta: ReadModelMeta::new_random(),
        customer: "ada".into(),
        email: "ada@example.com".into(),
        status: Status::Open,
        total: 4_500,
        amount: Some("12.50".into()),
        note: None,
        ratio: 0.5,
        paid: true,
        owner: Some(Uuid::new_v4()),
        due: None,
        day: NaiveDate::from_ymd_opt(2024, 2, 29).unwrap(),
        tags: serde_json::json!({"vip": true}),
        blob: vec![0, 1, 255],
        small: -3,
        nick: "Ada".into(),
        seen: None,
        cache: None,
    }
}

#[test]
fn descriptors_follow_the_rust_types_and_attributes() {
    let fields = OrderSummary::fields();
    let by = |name: &str| fields.iter().find(|f| f.name == name).unwrap().clone();
    assert_eq!(fields.len(), 16, "skip leaves `cache` out");
    assert_eq!(
        by("customer"),
        FieldDescriptor::new("customer", FieldType::Text)
    );
    assert_eq!(
        by("status"),
        FieldDescriptor::new("status", FieldType::Other("Status".into()))
            .with_sql_type("VARCHAR(16)")
            .with_default(DefaultValue::Text("Open".into()))
    );
    assert_eq!(
        by("total_cents"),
        FieldDescriptor::new("total_cents", FieldType::Integer)
            .with_default(DefaultValue::Integer(0))
    );
    assert_eq!(
        by("amount"),
        FieldDescriptor::new("amount", FieldType::Decimal).nullable()
    );
    assert_eq!(
        by("note"),
        FieldDescriptor::new("note", FieldType::Text).nullable()
    );
    assert_eq!(by("ratio").field_type, FieldType::Float);
    assert_eq!(by("paid").field_type, FieldType::Bool);
    assert_eq!(
        by("owner"),
        FieldDescriptor::new("owner", FieldType::Uuid).nullable()
    );
    assert_eq!(
        by("due"),
        FieldDescriptor::new("due", FieldType::Timestamp).nullable()
    );
    assert_eq!(by("day").field_type, FieldType::Date);
    assert_eq!(by("tags").field_type, FieldType::Json);
    assert_eq!(by("blob").field_type, FieldType::Bytes);
    assert_eq!(by("small").field_type, FieldType::Integer);
    let nick = by("nick");
    assert_eq!(
        (
            nick.sql_type.postgres.as_deref(),
            nick.sql_type.sqlite.as_deref()
        ),
        (Some("CITEXT"), Some("TEXT COLLATE NOCASE"))
    );
    assert_eq!(
        by("seen").default,
        Some(DefaultValue::Expression("CURRENT_TIMESTAMP".into()))
    );
    assert!(by("seen").nullable);
}

#[test]
fn indexes_and_table_name_are_generated() {
    assert_eq!(OrderSummary::TABLE_NAME, Some("order_summaries"));
    assert_eq!(
        OrderSummary::indexes(),
        vec![
            IndexDescriptor::on(["status", "customer"]),
            IndexDescriptor::on(["email"])
                .unique()
                .named("orders_by_email"),
            IndexDescriptor::on(["total_cents"]).postgres_where("status <> 'Closed'"),
        ]
    );
}

macro_rules! same_name_as_at_run_time {
    ($($ty:ident),*) => {$({
        #[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
        #[allow(clippy::upper_case_acronyms)]
        struct $ty {
            #[serde(flatten)]
            meta: ReadModelMeta,
        }
        assert_eq!(
            $ty::TABLE_NAME.unwrap(),
            default_table_name(stringify!($ty)),
            "{}",
            stringify!($ty)
        );
    })*};
}

#[test]
fn compile_time_table_names_match_the_run_time_rules() {
    same_name_as_at_run_time!(
        OrderSummary,
        Category,
        Key,
        Box,
        Status,
        Branch,
        Wish,
        HTTPRequest,
        Order2Item,
        Day,
        Address,
        Quiz,
        Buzz,
        Tax,
        Entry,
        Toy
    );
    #[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
    #[read_model(table = "legacy_orders")]
    struct Renamed {
        #[serde(flatten)]
        meta: ReadModelMeta,
    }
    assert_eq!(Renamed::table_name(), "legacy_orders");
}

#[test]
fn column_constants_name_the_columns() {
    assert_eq!(OrderSummary::CUSTOMER.name(), "customer");
    assert_eq!(OrderSummary::TOTAL.name(), "total_cents");
    assert_eq!(
        Filter::gte(OrderSummary::TOTAL, 10),
        Filter::gte("total_cents", 10)
    );
}

#[test]
fn direct_conversion_agrees_with_the_serde_form() {
    let o = order();
    let fields = OrderSummary::fields();
    let direct = o.to_values(&fields).unwrap();
    // The serde path (what a hand-written impl uses), with the renamed
    // column under its serde key.
    let mut serde_fields = fields.clone();
    serde_fields
        .iter_mut()
        .find(|f| f.name == "total_cents")
        .unwrap()
        .name = "total".into();
    let via_serde =
        pgcoord::readmodels::storage::Record::from_model(&Manual(o.clone()), &serde_fields)
            .unwrap()
            .values;
    assert_eq!(direct, via_serde);
    let back = OrderSummary::from_values(o.meta.clone(), direct, &fields).unwrap();
    assert_eq!(back, o);
}

/// The same model through the serde-based defaults of a hand-written impl.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manual(OrderSummary);

impl ReadModel for Manual {
    fn fields() -> Vec<FieldDescriptor> {
        OrderSummary::fields()
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.0.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.0.meta
    }
}

#[tokio::test]
async fn derived_models_round_trip_through_a_repository() {
    let repo = InMemoryReadModelRepository::<OrderSummary>::new();
    let mut o = order();
    o.cache = Some(9);
    let saved = repo.save(&o).await.unwrap();
    assert_eq!(saved.cache, None, "skipped fields are not stored");
    o.cache = None;
    o.meta.updated_at = saved.meta.updated_at; // stamped on insert
    assert_eq!(saved, o);
    let found = repo
        .find(&Query::new().filter(Filter::eq(OrderSummary::STATUS, "Open")))
        .await
        .unwrap();
    assert_eq!(found, vec![o.clone()]);
    let closed = repo
        .count(&Query::new().filter(Filter::eq(OrderSummary::STATUS, "Closed")))
        .await
        .unwrap();
    assert_eq!(closed, 0);

    // String names are column names: `total` is stored as `total_cents`.
    let by_column = Query::new().filter(Filter::gte("total_cents", 0));
    assert_eq!(repo.count(&by_column).await.unwrap(), 1);
    let by_field = Query::new().filter(Filter::gte("total", 0));
    let err = repo.count(&by_field).await.unwrap_err();
    let text = err.to_string();
    assert!(err.as_read_model().unwrap().is_invalid_query(), "{text}");
    assert!(
        text.contains(r#"unknown field "total": queries name columns, not Rust fields"#)
            && text.contains(r#""total_cents""#),
        "{text}"
    );
}

#[test]
fn a_value_that_does_not_fit_is_a_serialization_error_naming_the_field() {
    let o = order();
    let fields = OrderSummary::fields();
    let mut values = o.to_values(&fields).unwrap();
    let small = fields.iter().position(|f| f.name == "small").unwrap();
    values[small] = pgcoord::readmodels::Value::Integer(100_000);
    let err = OrderSummary::from_values(o.meta.clone(), values, &fields).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("\"small\"") && text.contains("does not fit"),
        "{text}"
    );
}
