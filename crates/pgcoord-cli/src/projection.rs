//! `eventsource projection status`: the library's `projection_status`,
//! as text, JSON and a progress bar on a terminal.

use std::io::IsTerminal;

use pgcoord::Error;

use crate::db::answered;
use crate::db::{self, Database};
use crate::projection_args::{ProjectionCommand, ProjectionStatusArgs};
use crate::projection_reads::{look, missing_table_note, other_names_note};
use crate::projection_render::{draw_bars, json, render_report};
use crate::projection_watch::Watch;
use crate::{exit, report};

/// The table of the projections' checkpoints (the library's).
const CHECKPOINT_TABLE: &str = "eventsource_projection_checkpoints";

/// How the library's error for an `--events-table` the database lacks begins.
const NO_EVENT_TABLE: &str = "there is no event table";

/// Runs `eventsource projection ...`; returns the exit code.
pub async fn projection(command: ProjectionCommand, db: Database) -> i32 {
    match command {
        ProjectionCommand::Status(args) => status(args, db).await,
        ProjectionCommand::Dlq(command) => crate::projection_dlq::dlq(command, db).await,
    }
}

async fn status(args: ProjectionStatusArgs, db: Database) -> i32 {
    let client = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot read the projection's status", Some(&db), &e),
    };
    // A standby's advisory locks are its own sessions' only: who runs the
    // projection (a lock on the primary) cannot be seen there; the rest can.
    let standby = match db::in_recovery(&client).await {
        Ok(standby) => standby,
        Err(e) => return db::fail("cannot read the projection's status", Some(&db), &e),
    };
    if standby {
        crate::projection_watch::warn_standby();
    }
    // The first look ends the command on any failure (a wrong table, a
    // missing privilege); a watch rides out the failures of later ones.
    let (status, rebuild) = match answered(look(&client, &args)).await {
        Ok(s) => s,
        Err(e) => return fail(&e, &db),
    };
    if status.checkpoint.is_none() && !args.watch {
        // A segmented projection's base name: its segments' lines instead.
        match crate::projection_segments::segments_report(&client, &args, standby).await {
            Ok(Some(text)) => return crate::print_stdout(&text).map_or_else(|code| code, |()| 0),
            Ok(None) => {}
            Err(e) => return fail(&e, &db),
        }
    }
    if status.checkpoint.is_none() {
        let note = match missing_table_note(&client, CHECKPOINT_TABLE).await {
            Ok(None) => other_names_note(&client, CHECKPOINT_TABLE, &args.name).await,
            missing => missing,
        };
        match note {
            Ok(Some(note)) => report!("{note}"),
            Ok(None) => {}
            Err(e) => return db::fail("cannot read the projection's status", Some(&db), &e),
        }
    }
    if args.watch {
        let watch = Watch {
            args: &args,
            db: &db,
            standby,
        };
        return watch.run(client, (status, rebuild)).await;
    }
    let text = match args.json {
        true => format!("{}\n", json(&status, rebuild.as_ref(), standby)),
        false => render_report(&status, rebuild.as_ref(), standby),
    };
    if std::io::stderr().is_terminal() {
        draw_bars(&status, rebuild.as_ref(), false);
    }
    match crate::print_stdout(&text) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

/// The exit code (and its line) of a look that failed.
fn fail(e: &Error, db: &Database) -> i32 {
    match e {
        // The name was fine (it is checked before any query), but the
        // database has no such table: it lacks what the option needs.
        Error::InvalidArgument(msg) if msg.starts_with(NO_EVENT_TABLE) => {
            report!("{msg} (database {})", db.shown());
            exit::CONFIG
        }
        Error::InvalidArgument(msg) => {
            report!("{msg}");
            exit::USAGE
        }
        e => db::fail("cannot read the projection's status", Some(db), e),
    }
}
