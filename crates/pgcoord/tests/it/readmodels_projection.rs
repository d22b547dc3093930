//! The read-model projection: one transaction per event, retries with
//! backoff on transient errors, reset; on the in-memory, SQLite and
//! PostgreSQL backends and through the connection factory.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{
    FieldDescriptor, FieldType, Filter, Query, ReadModel, ReadModelHandler, ReadModelMeta,
    ReadModelRepository, TransactionalReadModels,
};
use pgcoord::readmodels::{ReadModelProjection, RetryPolicy};
use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error, Result,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CartSummary {
    #[serde(flatten)]
    meta: ReadModelMeta,
    owner: String,
    items: i64,
    total_cents: i64,
}

impl ReadModel for CartSummary {
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("owner", FieldType::Text),
            FieldDescriptor::new("items", FieldType::Integer),
            FieldDescriptor::new("total_cents", FieldType::Integer),
        ]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

enum CartEvent {
    Opened {
        cart: Uuid,
        owner: String,
    },
    ItemAdded {
        cart: Uuid,
        cents: i64,
    },
    Abandoned {
        cart: Uuid,
    },
    /// Writes, then fails: nothing of it may persist.
    Poison {
        cart: Uuid,
    },
    /// Fails transiently `times` times (counted across attempts), then adds an item.
    Flaky {
        cart: Uuid,
        times: u32,
    },
}

#[derive(Default)]
struct Carts {
    flaky_failures: AtomicU32,
    attempts: AtomicU32,
}

fn transient() -> Error {
    BackendError::new(BackendErrorKind::Closed, "connection reset").into()
}

impl ReadModelHandler for Carts {
    type Model = CartSummary;
    type Event = CartEvent;

    async fn handle<R: ReadModelRepository<CartSummary>>(
        &self,
        event: &CartEvent,
        repo: &R,
    ) -> Result<()> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        match event {
            CartEvent::Opened { cart, owner } => {
                repo.save(&CartSummary {
                    meta: ReadModelMeta::new(*cart),
                    owner: owner.clone(),
                    items: 0,
                    total_cents: 0,
                })
                .await?;
            }
            CartEvent::ItemAdded { cart, cents } => add_item(repo, *cart, *cents).await?,
            CartEvent::Abandoned { cart } => {
                repo.soft_delete(*cart).await?;
            }
            CartEvent::Poison { cart } => {
                add_item(repo, *cart, 1_000_000).await?;
                return Err(Error::InvalidArgument("poison event".into()));
            }
            CartEvent::Flaky { cart, times } => {
                add_item(repo, *cart, 1).await?;
                if self.flaky_failures.fetch_add(1, Ordering::SeqCst) < *times {
                    return Err(transient());
                }
            }
        }
        Ok(())
    }
}

async fn add_item<R: ReadModelRepository<CartSummary>>(
    repo: &R,
    cart: Uuid,
    cents: i64,
) -> Result<()> {
    let mut summary = repo
        .get(cart)
        .await?
        .ok_or_else(|| Error::InvalidArgument(format!("no cart {cart}")))?;
    summary.items += 1;
    summary.total_cents += cents;
    repo.save_with_version_check(&summary).await?;
    Ok(())
}

fn no_wait(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        multiplier: 1.0,
    }
}

/// The whole behaviour, on any backend.
async fn exercise<B>(backend: B)
where
    B: TransactionalReadModels<CartSummary> + ReadModelRepository<CartSummary>,
{
    let projection = ReadModelProjection::new(Carts::default(), backend).with_retry(no_wait(3));
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let events = [
        CartEvent::Opened {
            cart: a,
            owner: "ann".into(),
        },
        CartEvent::ItemAdded {
            cart: a,
            cents: 250,
        },
        CartEvent::ItemAdded {
            cart: a,
            cents: 100,
        },
        CartEvent::Opened {
            cart: b,
            owner: "bob".into(),
        },
        CartEvent::Abandoned { cart: b },
    ];
    projection.handle_all(&events).await.unwrap();
    let repo = projection.backend();
    let cart_a = repo.get(a).await.unwrap().unwrap();
    assert_eq!(
        (cart_a.items, cart_a.total_cents, cart_a.meta.version),
        (2, 350, 3)
    );
    assert!(repo.get(b).await.unwrap().is_none());
    assert!(repo.get_deleted(b).await.unwrap().is_some());

    // A failing handler rolls its event back and is not retried.
    let before = projection.handler().attempts.load(Ordering::SeqCst);
    let err = projection
        .handle(&CartEvent::Poison { cart: a })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(
        projection.handler().attempts.load(Ordering::SeqCst),
        before + 1
    );
    assert_eq!(repo.get(a).await.unwrap().unwrap(), cart_a);

    // Transient failures are retried; the failed attempts left nothing behind.
    let before = projection.handler().attempts.load(Ordering::SeqCst);
    projection
        .handle(&CartEvent::Flaky { cart: a, times: 2 })
        .await
        .unwrap();
    assert_eq!(
        projection.handler().attempts.load(Ordering::SeqCst),
        before + 3
    );
    let after = repo.get(a).await.unwrap().unwrap();
    assert_eq!(
        (after.items, after.total_cents, after.meta.version),
        (3, 351, 4)
    );

    // Out of attempts: the transient error comes back, nothing persisted.
    projection
        .handler()
        .flaky_failures
        .store(0, Ordering::SeqCst);
    let err = projection
        .handle(&CartEvent::Flaky { cart: a, times: 10 })
        .await
        .unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Closed)
    );
    assert_eq!(repo.get(a).await.unwrap().unwrap().items, 3);

    // reset() empties the table, soft-deleted rows included.
    assert_eq!(projection.reset().await.unwrap(), 2);
    assert_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn projection_on_the_in_memory_backend() {
    exercise(InMemoryReadModelRepository::<CartSummary>::new()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn projection_on_sqlite_through_the_connection_factory() {
    let db = pgcoord::readmodels::connect("sqlite::memory:")
        .await
        .unwrap();
    assert!(matches!(db, pgcoord::readmodels::Database::Sqlite(_)));
    db.create_schema::<CartSummary>().await.unwrap();
    exercise(db.repository::<CartSummary>()).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn projection_on_postgres_through_the_connection_factory() {
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let db = pgcoord::readmodels::connect(&test_db.url()).await.unwrap();
    assert!(matches!(db, pgcoord::readmodels::Database::Postgres(_)));
    db.create_schema::<CartSummary>().await.unwrap();
    exercise(db.repository::<CartSummary>()).await;
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially() {
    let projection = ReadModelProjection::new(Carts::default(), InMemoryReadModelRepository::new())
        .with_retry(RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            multiplier: 3.0,
        });
    let cart = Uuid::new_v4();
    projection
        .handle(&CartEvent::Opened {
            cart,
            owner: "c".into(),
        })
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    projection
        .handle(&CartEvent::Flaky { cart, times: 3 })
        .await
        .unwrap();
    // Paused clock: the elapsed time is the sum of the jittered backoffs,
    // each in the upper half of 100, 300, 900 ms.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(650) && waited <= Duration::from_millis(1300),
        "{waited:?}"
    );
    let summary = projection.backend().get(cart).await.unwrap().unwrap();
    assert_eq!(summary.items, 1);
    assert_eq!(
        projection
            .backend()
            .count(&Query::new().filter(Filter::eq("owner", "c")))
            .await
            .unwrap(),
        1
    );
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn projection_on_postgres_with_a_single_locked_client() {
    use pgcoord::readmodels::postgres::PostgresReadModelRepository;
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let client = test_db.connect().await.unwrap();
    let repo = PostgresReadModelRepository::<CartSummary, _>::new(tokio::sync::Mutex::new(client));
    repo.create_schema().await.unwrap();
    exercise(repo).await;
}
