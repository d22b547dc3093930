//! A worked read-model example: a derived model, a checkpointed projection
//! fed with `(position, event)` pairs, and queries. Without an argument it
//! runs on the in-memory repository; given a URL (the same a lock manager
//! takes, TLS parameters included) it runs on that database:
//!
//! ```text
//! cargo run -p pgcoord --example readmodels                           # in memory
//! cargo run -p pgcoord --example readmodels -- postgres://postgres@127.0.0.1/app
//! cargo run -p pgcoord --features sqlite --example readmodels -- sqlite://   # SQLite in memory
//! cargo run -p pgcoord --features sqlite --example readmodels -- sqlite:///orders.db
//! ```
//!
//! Copied into an application, it behaves the same: the backend is chosen
//! at run time from the URL, never by a `cfg`. Its dependencies: `pgcoord`
//! (default features; add `features = ["sqlite"]` for `sqlite://` URLs,
//! else such a URL is refused with an error naming that feature), `tokio`
//! with `macros` and `rt-multi-thread`, and `serde` with `derive`.

use pgcoord::readmodels::{
    Direction, Filter, Query, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository,
    TransactionalReadModels,
};
use pgcoord::readmodels::{ReadModelProjection, RetryPolicy};
use pgcoord::uuid::Uuid;
use serde::{Deserialize, Serialize};

/// The read model: one row per order, in the table `order_summaries`
/// (derived from the name at compile time), with an index on
/// `(status, customer)`.
#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(index(status, customer))]
pub struct OrderSummary {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    customer: String,
    #[column(default = "open")]
    status: String,
    total_cents: i64,
    shipped_to: Option<String>,
}

/// The domain events the projection consumes.
enum OrderEvent {
    Placed { order: Uuid, customer: String },
    LineAdded { order: Uuid, cents: i64 },
    Shipped { order: Uuid, to: String },
    Cancelled { order: Uuid },
}

/// The projection's handler: how each event changes the read model. It is
/// generic over the repository, so it runs unchanged on every backend.
struct OrderSummaries;

impl ReadModelHandler for OrderSummaries {
    type Model = OrderSummary;
    type Event = OrderEvent;

    async fn handle<R: ReadModelRepository<OrderSummary>>(
        &self,
        event: &OrderEvent,
        repo: &R,
    ) -> pgcoord::Result<()> {
        match event {
            OrderEvent::Placed { order, customer } => {
                repo.save(&OrderSummary {
                    meta: ReadModelMeta::new(*order),
                    customer: customer.clone(),
                    status: "open".into(),
                    total_cents: 0,
                    shipped_to: None,
                })
                .await?;
            }
            OrderEvent::LineAdded { order, cents } => {
                if let Some(mut summary) = repo.get(*order).await? {
                    summary.total_cents += cents;
                    // Fails with a version conflict if someone else wrote in between.
                    repo.save_with_version_check(&summary).await?;
                }
            }
            OrderEvent::Shipped { order, to } => {
                if let Some(mut summary) = repo.get(*order).await? {
                    summary.status = "shipped".into();
                    summary.shipped_to = Some(to.clone());
                    repo.save(&summary).await?;
                }
            }
            OrderEvent::Cancelled { order } => {
                repo.soft_delete(*order).await?;
            }
        }
        Ok(())
    }
}

pub async fn demo<B>(backend: B) -> pgcoord::Result<()>
where
    B: TransactionalReadModels<OrderSummary> + ReadModelRepository<OrderSummary>,
{
    // One transaction per event, its checkpoint in the same transaction;
    // transient failures retried with jittered backoff.
    let projection = ReadModelProjection::new(OrderSummaries, backend)
        .named("order-summaries")
        .with_retry(RetryPolicy::default());
    projection.reset().await?; // start from an empty table and no checkpoint

    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let events = [
        OrderEvent::Placed {
            order: a,
            customer: "ada".into(),
        },
        OrderEvent::LineAdded {
            order: a,
            cents: 4_500,
        },
        OrderEvent::LineAdded {
            order: a,
            cents: 1_250,
        },
        OrderEvent::Placed {
            order: b,
            customer: "bob".into(),
        },
        OrderEvent::LineAdded {
            order: b,
            cents: 999,
        },
        OrderEvent::Shipped {
            order: a,
            to: "Lisbon".into(),
        },
        OrderEvent::Placed {
            order: c,
            customer: "cy".into(),
        },
        OrderEvent::Cancelled { order: c },
    ];
    // Positions are the events' places in the event store.
    let feed = || events.iter().enumerate().map(|(i, e)| (i as i64 + 1, e));
    let first = projection.catch_up(feed()).await?;
    assert_eq!(first.applied, 8);
    // Replaying the feed (after a restart, say) applies nothing twice.
    let replay = projection.catch_up(feed()).await?;
    assert_eq!((replay.applied, replay.skipped), (0, 8));
    assert_eq!(projection.checkpoint().await?, Some(8));

    let repo = projection.backend();
    let ada = repo.get(a).await?.expect("order a");
    println!(
        "ada: {} cents, {}, version {}",
        ada.total_cents, ada.status, ada.meta.version
    );
    assert_eq!((ada.total_cents, ada.meta.version), (5_750, 4));

    // Open orders over 5 euros, biggest first.
    let big_open = repo
        .find(
            &Query::new()
                .filter(Filter::eq(OrderSummary::STATUS, "open"))
                .filter(Filter::gt(OrderSummary::TOTAL_CENTS, 500))
                .order_by(OrderSummary::TOTAL_CENTS, Direction::Desc)
                .limit(10),
        )
        .await?;
    println!(
        "big open orders: {:?}",
        big_open.iter().map(|o| &o.customer).collect::<Vec<_>>()
    );
    assert_eq!(big_open.len(), 1);

    // NULL semantics: `ne` matches rows whose shipped_to is NULL.
    let not_lisbon = repo
        .count(&Query::new().filter(Filter::ne(OrderSummary::SHIPPED_TO, "Lisbon")))
        .await?;
    assert_eq!(not_lisbon, 1); // bob (c is soft-deleted)

    // Soft-deleted rows are hidden unless asked for.
    assert_eq!(repo.count(&Query::new()).await?, 2);
    assert_eq!(repo.count(&Query::new().include_deleted(true)).await?, 3);
    assert_eq!(repo.find_deleted(&Query::new()).await?.len(), 1);

    // Unknown fields fail before any SQL runs.
    let err = repo
        .find(&Query::new().filter(Filter::eq("colour", "red")))
        .await
        .unwrap_err();
    println!("as expected: {err}");
    assert_eq!(OrderSummary::table_name(), "order_summaries");
    Ok(())
}

#[tokio::main]
async fn main() -> pgcoord::Result<()> {
    match std::env::args().nth(1) {
        Some(url) => {
            let db = pgcoord::readmodels::connect(&url).await?;
            db.create_schema::<OrderSummary>().await?;
            println!("on {:?} (from the URL given)", db.dialect());
            demo(db.repository::<OrderSummary>()).await
        }
        None => {
            println!(
                "in memory (no URL given; pass a postgres:// or sqlite:// URL for a database)"
            );
            let repo = pgcoord::readmodels::InMemoryReadModelRepository::<OrderSummary>::new();
            demo(repo).await
        }
    }
}
