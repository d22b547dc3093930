//! `eventsource projection dlq list|show|replay|drop NAME`: a projection's
//! parked events, through the library's dead-letter calls on a plain
//! client. `replay` only marks: the projection's runner applies the marked
//! events through its handler, which the tool does not know.

use std::io::{BufRead, IsTerminal, Write};

use pgcoord::readmodels::postgres::{
    drop_dead_letters, list_dead_letters, projection_status, request_replay,
};
use pgcoord::readmodels::{DeadLetter, DeadLetterSelection};
use tokio_postgres::Client;

use crate::db::{self, Database};
use crate::projection_args::{DlqChangeArgs, DlqCommand, DlqDropArgs, DlqListArgs, DlqShowArgs};
use crate::report;

/// Not done: a POSITION given is not parked (the others were acted on),
/// or `drop` was declined at its question.
const NOT_DONE: i32 = 1;

/// Runs `eventsource projection dlq ...`; returns the exit code.
pub async fn dlq(command: DlqCommand, db: Database) -> i32 {
    let client = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("cannot read the parked events", Some(&db), &e),
    };
    let done = match command {
        DlqCommand::List(args) => list(&client, args).await,
        DlqCommand::Show(args) => show(&client, args).await,
        DlqCommand::Replay(args) => replay(&client, args).await,
        DlqCommand::Drop(args) => drop_letters(&client, args).await,
    };
    match done {
        Ok(code) => code,
        Err(e) => db::fail("cannot change the parked events", Some(&db), &e),
    }
}

type Outcome = Result<i32, pgcoord::Error>;

fn print(text: &str) -> i32 {
    match crate::print_stdout(text) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    format!("{}\n", serde_json::to_string(value).expect("plain data"))
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn list(client: &Client, args: DlqListArgs) -> Outcome {
    let letters = list_dead_letters(client, &args.name, &DeadLetterSelection::All).await?;
    if args.json {
        return Ok(print(&json(&letters)));
    }
    if letters.is_empty() {
        return Ok(print(&format!(
            "projection {} has no parked events\n",
            args.name
        )));
    }
    let mut out = format!(
        "{:<10} {:<16} {:>8}  {:<20}  {}\n",
        "POSITION", "PARTITION", "ATTEMPTS", "LAST FAILURE", "ERROR"
    );
    for l in &letters {
        let error: String = l
            .error
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect();
        let replay = if l.replay_requested {
            " (replay requested)"
        } else {
            ""
        };
        out += &format!(
            "{:<10} {:<16} {:>8}  {:<20}  {error}{replay}\n",
            l.position,
            l.partition.as_deref().unwrap_or("-"),
            l.attempts,
            time(l.last_failure),
        );
    }
    Ok(print(&out))
}

async fn show(client: &Client, args: DlqShowArgs) -> Outcome {
    let which = DeadLetterSelection::Positions(vec![args.position]);
    let Some(l) = list_dead_letters(client, &args.name, &which).await?.pop() else {
        report!(
            "projection {} has no parked event at position {}",
            args.name,
            args.position
        );
        return Ok(NOT_DONE);
    };
    if args.json {
        return Ok(print(&json(&l)));
    }
    Ok(print(&render(&l)))
}

fn render(l: &DeadLetter) -> String {
    let payload = l.payload.as_ref().map_or("- (not serialised)".into(), |p| {
        serde_json::to_string_pretty(p).expect("plain data")
    });
    format!(
        "projection     {}\nposition       {}\npartition      {}\nheld behind    {}\nattempts       {}\n\
         first failure  {}\nlast failure   {}\nreplay         {}\nerror          {}\npayload        {}\n",
        l.projection,
        l.position,
        l.partition.as_deref().unwrap_or("-"),
        l.behind.map_or("-".into(), |b| format!("position {b}")),
        l.attempts,
        time(l.first_failure),
        time(l.last_failure),
        if l.replay_requested { "requested" } else { "not requested" },
        l.error,
        payload,
    )
}

/// The selection of `args`, and the positions given that are not parked
/// (reported on standard error).
async fn select(
    client: &Client,
    args: &DlqChangeArgs,
) -> Result<(DeadLetterSelection, bool), pgcoord::Error> {
    if args.all {
        return Ok((DeadLetterSelection::All, false));
    }
    let which = DeadLetterSelection::Positions(args.positions.clone());
    let parked: Vec<i64> = list_dead_letters(client, &args.name, &which)
        .await?
        .iter()
        .map(|l| l.position)
        .collect();
    let missing: Vec<String> = args
        .positions
        .iter()
        .filter(|p| !parked.contains(p))
        .map(|p| p.to_string())
        .collect();
    if !missing.is_empty() {
        report!(
            "projection {} has no parked event at position {}",
            args.name,
            missing.join(", ")
        );
    }
    Ok((which, !missing.is_empty()))
}

async fn replay(client: &Client, args: DlqChangeArgs) -> Outcome {
    let (which, missing) = select(client, &args).await?;
    let marked = request_replay(client, &args.name, &which).await?;
    let runner = projection_status(client, &args.name, None).await?.runner;
    let code = if args.json {
        print(&json(&serde_json::json!({
            "projection": args.name,
            "marked": marked,
            "runner": runner.is_some(),
        })))
    } else {
        let when = if runner.is_some() {
            "its runner applies them through its handler before its next batch".to_owned()
        } else {
            format!(
                "no runner holds projection:{} now; the next one applies them through its handler when it starts",
                args.name
            )
        };
        print(&format!(
            "marked {marked} parked event(s) of projection {} for replay: {when}\n",
            args.name
        ))
    };
    Ok(if code == 0 && missing { NOT_DONE } else { code })
}

async fn drop_letters(client: &Client, args: DlqDropArgs) -> Outcome {
    let which_args = &args.which;
    let (which, missing) = select(client, which_args).await?;
    if !args.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        let n = list_dead_letters(client, &which_args.name, &which)
            .await?
            .len();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "drop {n} parked event(s) of projection {} without applying them? [y/N] ",
            which_args.name
        );
        let _ = err.flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            report!("nothing dropped");
            return Ok(NOT_DONE);
        }
    }
    let dropped = drop_dead_letters(client, &which_args.name, &which).await?;
    let code = if which_args.json {
        print(&json(&serde_json::json!({
            "projection": which_args.name,
            "dropped": dropped,
        })))
    } else {
        print(&format!(
            "dropped {dropped} parked event(s) of projection {}\n",
            which_args.name
        ))
    };
    Ok(if code == 0 && missing { NOT_DONE } else { code })
}
