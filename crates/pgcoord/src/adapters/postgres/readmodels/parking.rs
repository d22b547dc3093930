//! The PostgreSQL repository's dead-letter transactions for the projection
//! runner: a batch that holds events behind parked ones of their partition,
//! parking an event with its checkpoint, and replaying a parked event. Each
//! is one transaction, so a runner killed anywhere in one neither loses an
//! event nor applies it twice.

use super::dead_letters::{self, heads, insert};
use super::own_transaction::OwnTransaction;
use super::projection::{advance_in, advance_notify, read_checkpoint, read_checkpoint_in};
use super::source::{query_error, PgClientSource};
use super::PostgresReadModelRepository;
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{HeldBatch, HoldingBatch, Parking, ReadModel, ReadModelHandler};

fn in_caller_transaction() -> Error {
    Error::InvalidArgument(
        "dead letters need transactions of the repository's own (not a caller's transaction)"
            .into(),
    )
}

impl<M: ReadModel, S: PgClientSource> PostgresReadModelRepository<M, S> {
    pub(super) async fn prepare_dead_letter_table(&self) -> Result<()> {
        let client = self.source.client().await?;
        dead_letters::prepare(&*client).await
    }

    pub(super) async fn hold_batch<H>(
        &self,
        projection: &str,
        batch: &HoldingBatch<'_, H::Event>,
        handler: &H,
    ) -> Result<HeldBatch>
    where
        H: ReadModelHandler<Model = M>,
    {
        let Some(mut client) = self.source.exclusive().await? else {
            return Err(in_caller_transaction());
        };
        let tx = OwnTransaction::begin(&mut client).await?;
        let mut checkpoint = read_checkpoint_in(&tx, projection).await?;
        let parked = if batch.sequenced {
            let keys: Vec<&str> = batch
                .partitions
                .iter()
                .flatten()
                .map(String::as_str)
                .collect();
            heads(&*tx, projection, &keys).await?
        } else {
            Default::default()
        };
        let mut done = HeldBatch::default();
        {
            let repo = PostgresReadModelRepository::<M, _>::with_table(&tx, self.table.clone());
            for ((position, event), partition) in batch.events.iter().zip(batch.partitions) {
                if checkpoint.is_some_and(|c| *position <= c) {
                    continue;
                }
                let head = partition.as_ref().and_then(|k| parked.get(k).copied());
                if let Some(head) = head {
                    let parking = Parking {
                        position: *position,
                        partition: partition.clone(),
                        payload: (batch.payload)(event),
                        error: format!("behind position {head}"),
                        attempts: 0,
                        first_failure: chrono::Utc::now(),
                    };
                    insert(&*tx, projection, &parking, Some(head)).await?;
                    done.held += 1;
                } else {
                    handler.handle(event, &repo).await?;
                    done.applied += 1;
                }
                checkpoint = Some(*position);
            }
        }
        if let (Some(last), true) = (checkpoint, done.applied + done.held > 0) {
            if !advance_in(&tx, projection, last).await? {
                return Ok(HeldBatch::default()); // another runner got there first
            }
        }
        tx.commit().await?;
        Ok(done)
    }

    pub(super) async fn park_event(&self, projection: &str, parking: &Parking) -> Result<bool> {
        let Some(mut client) = self.source.exclusive().await? else {
            return Err(in_caller_transaction());
        };
        let tx = client.transaction().await.map_err(query_error)?;
        if read_checkpoint(&tx, projection)
            .await?
            .is_some_and(|c| parking.position <= c)
        {
            return Ok(false);
        }
        insert(&tx, projection, parking, None).await?;
        if !advance_notify(&tx, projection, parking.position).await? {
            return Ok(false);
        }
        tx.commit().await.map_err(query_error)?;
        Ok(true)
    }

    pub(super) async fn replay_one<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<bool>
    where
        H: ReadModelHandler<Model = M>,
    {
        let Some(mut client) = self.source.exclusive().await? else {
            return Err(in_caller_transaction());
        };
        let tx = client.transaction().await.map_err(query_error)?;
        // The row stays locked until the commit: a concurrent replay of the
        // same letter waits, then finds nothing.
        let gone = tx
            .execute(
                r#"DELETE FROM "eventsource_projection_dead_letters" WHERE "projection" = $1 AND "position" = $2"#,
                &[&projection, &position],
            )
            .await
            .map_err(query_error)?;
        if gone == 0 {
            return Ok(false);
        }
        {
            let repo = PostgresReadModelRepository::<M, _>::with_table(&tx, self.table.clone());
            handler.handle(event, &repo).await?;
        }
        tx.commit().await.map_err(query_error)?;
        Ok(true)
    }
}
