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

use crate::db::answered;
use crate::db::{self, Database};
use crate::printable::{printable, printable_json, shortened, SHOWN_KEY_WIDTH};
use crate::projection_args::{DlqChangeArgs, DlqCommand, DlqDropArgs, DlqListArgs, DlqShowArgs};
use crate::projection_reads::missing_table_note;
use crate::projection_segments::segment_names;
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
    let (context, done) = match command {
        DlqCommand::List(args) => ("cannot list the parked events", list(&client, args).await),
        DlqCommand::Show(args) => ("cannot show the parked event", show(&client, args).await),
        DlqCommand::Replay(args) => (
            "cannot mark the parked events for replay",
            replay(&client, args).await,
        ),
        DlqCommand::Drop(args) => (
            "cannot drop the parked events",
            drop_letters(&client, args).await,
        ),
    };
    match done {
        Ok(code) => code,
        Err(e) => db::fail(context, Some(&db), &e),
    }
}

/// The dead-letter table (the library's).
const DEAD_LETTER_TABLE: &str = "eventsource_projection_dead_letters";

/// Nothing parked was found: says so on standard error when the reason may
/// be that the table is not visible here (see [`missing_table_note`]).
async fn note_if_no_table(client: &Client) -> Result<(), pgcoord::Error> {
    if let Some(note) = missing_table_note(client, DEAD_LETTER_TABLE).await? {
        report!("{note}");
    }
    Ok(())
}

/// The parked events of `name` that `which` selects (bounded, see [`answered`]).
async fn parked(
    client: &Client,
    name: &str,
    which: &DeadLetterSelection,
) -> Result<Vec<DeadLetter>, pgcoord::Error> {
    answered(list_dead_letters(client, name, which)).await
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
    let mut letters = parked(client, &args.name, &DeadLetterSelection::All).await?;
    let mut segments = Vec::new();
    if letters.is_empty() {
        // A segmented projection's base name: its segments' parked events.
        segments = segment_names(client, DEAD_LETTER_TABLE, &args.name).await?;
        for name in &segments {
            letters.extend(parked(client, name, &DeadLetterSelection::All).await?);
        }
    }
    if letters.is_empty() {
        note_if_no_table(client).await?;
    }
    if args.json {
        return Ok(print(&json(&letters)));
    }
    if letters.is_empty() {
        return Ok(print(&format!(
            "projection {} has no parked events\n",
            printable(&args.name)
        )));
    }
    let mut out = String::new();
    if !segments.is_empty() {
        out += &format!(
            "projection {} is segmented: the parked events of its segments \
             (dlq show, replay and drop take the segment's name)\n",
            printable(&args.name)
        );
    }
    let (mut segment, mut header) = (None, true);
    for l in &letters {
        if !segments.is_empty() && segment != Some(&l.projection) {
            segment = Some(&l.projection);
            out += &format!("{}:\n", printable(&l.projection));
            header = true;
        }
        if std::mem::take(&mut header) {
            out += &format!(
                "{:<10} {:<16} {:>8}  {:<20}  {}\n",
                "POSITION", "PARTITION", "ATTEMPTS", "LAST FAILURE", "ERROR"
            );
        }
        // Its first line, escaped (the error is the handler's text: any
        // event's data may be in it), shortened.
        let first = l.error.split('\n').next().unwrap_or("");
        let error = shortened(first, ERROR_WIDTH);
        let replay = if l.replay_requested {
            " (replay requested)"
        } else {
            ""
        };
        out += &format!(
            "{:<10} {:<16} {:>8}  {:<20}  {error}{replay}\n",
            l.position,
            l.partition
                .as_deref()
                .map_or("-".to_owned(), |p| shortened(p, SHOWN_KEY_WIDTH)),
            l.attempts,
            time(l.last_failure),
        );
    }
    Ok(print(&out))
}

async fn show(client: &Client, args: DlqShowArgs) -> Outcome {
    let which = DeadLetterSelection::Positions(vec![args.position]);
    let Some(l) = parked(client, &args.name, &which).await?.pop() else {
        note_if_no_table(client).await?;
        report!(
            "projection {} has no parked event at position {}",
            printable(&args.name),
            args.position
        );
        return Ok(NOT_DONE);
    };
    if args.json {
        return Ok(print(&json(&l)));
    }
    Ok(print(&render(&l)))
}

/// The most of an error's first line `dlq list` shows.
const ERROR_WIDTH: usize = 80;

/// The label column of `dlq show`, which an error's further lines are
/// indented by.
const LABEL_WIDTH: usize = "first failure  ".len();

/// `dlq show`'s text: every text of the parked event escaped (see
/// [`printable`]); an error of several lines keeps them, each escaped and
/// indented under the first; the payload is its JSON, with what would not
/// print as `\uXXXX`.
fn render(l: &DeadLetter) -> String {
    let payload = l.payload.as_ref().map_or("- (not serialised)".into(), |p| {
        printable_json(&serde_json::to_string_pretty(p).expect("plain data"))
    });
    let error = l
        .error
        .split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join(&format!("\n{}", " ".repeat(LABEL_WIDTH)));
    format!(
        "projection     {}\nposition       {}\npartition      {}\nheld behind    {}\nattempts       {}\n\
         first failure  {}\nlast failure   {}\nreplay         {}\nerror          {}\npayload        {}\n",
        printable(&l.projection),
        l.position,
        l.partition.as_deref().map_or("-".to_owned(), printable),
        l.behind.map_or("-".into(), |b| format!("position {b}")),
        l.attempts,
        time(l.first_failure),
        time(l.last_failure),
        if l.replay_requested { "requested" } else { "not requested" },
        error,
        payload,
    )
}

/// The selection of `args` (for POSITIONs: those of them that are parked),
/// and whether some positions given are not parked (reported on standard
/// error).
async fn select(
    client: &Client,
    args: &DlqChangeArgs,
) -> Result<(DeadLetterSelection, bool), pgcoord::Error> {
    if args.all {
        return Ok((DeadLetterSelection::All, false));
    }
    let which = DeadLetterSelection::Positions(args.positions.clone());
    let found: Vec<i64> = parked(client, &args.name, &which)
        .await?
        .iter()
        .map(|l| l.position)
        .collect();
    let missing: Vec<String> = args
        .positions
        .iter()
        .filter(|p| !found.contains(p))
        .map(|p| p.to_string())
        .collect();
    if found.is_empty() {
        note_if_no_table(client).await?;
    }
    if !missing.is_empty() {
        report!(
            "projection {} has no parked event at position {}",
            printable(&args.name),
            missing.join(", ")
        );
    }
    Ok((DeadLetterSelection::Positions(found), !missing.is_empty()))
}

/// Nothing to act on: POSITIONs given, none of them parked.
fn is_empty(which: &DeadLetterSelection) -> bool {
    matches!(which, DeadLetterSelection::Positions(p) if p.is_empty())
}

async fn replay(client: &Client, args: DlqChangeArgs) -> Outcome {
    let (which, missing) = select(client, &args).await?;
    let marked = match is_empty(&which) {
        true => 0,
        false => answered(request_replay(client, &args.name, &which)).await?,
    };
    if marked == 0 && args.all {
        note_if_no_table(client).await?;
    }
    let runner = answered(projection_status(client, &args.name, None))
        .await?
        .runner;
    let code = if args.json {
        print(&json(&serde_json::json!({
            "projection": args.name,
            "marked": marked,
            "runner": runner.is_some(),
        })))
    } else {
        let when = if marked == 0 {
            "nothing to replay".to_owned()
        } else if runner.is_some() {
            "its runner applies them through its handler before its next batch".to_owned()
        } else {
            format!(
                "no runner holds projection:{} now; the next one applies them through its handler when it starts",
                printable(&args.name)
            )
        };
        print(&format!(
            "marked {marked} parked event(s) of projection {} for replay: {when}\n",
            printable(&args.name)
        ))
    };
    Ok(if code == 0 && missing { NOT_DONE } else { code })
}

async fn drop_letters(client: &Client, args: DlqDropArgs) -> Outcome {
    let which_args = &args.which;
    let (mut which, missing) = select(client, which_args).await?;
    if !args.yes && std::io::stdin().is_terminal() {
        // What the question counts is what is dropped: not an event
        // parked while the question waited for its answer.
        let counted: Vec<i64> = match which {
            DeadLetterSelection::Positions(found) => found,
            all => parked(client, &which_args.name, &all)
                .await?
                .iter()
                .map(|l| l.position)
                .collect(),
        };
        if !counted.is_empty() {
            let question = format!(
                "drop {} parked event(s) of projection {} without applying them? [y/N] ",
                counted.len(),
                printable(&which_args.name)
            );
            if !confirm(&question) {
                report!("nothing dropped");
                return Ok(NOT_DONE);
            }
        }
        which = DeadLetterSelection::Positions(counted);
    }
    let dropped = match is_empty(&which) {
        true => 0,
        false => answered(drop_dead_letters(client, &which_args.name, &which)).await?,
    };
    if dropped == 0 && which_args.all {
        note_if_no_table(client).await?;
    }
    let code = if which_args.json {
        print(&json(&serde_json::json!({
            "projection": which_args.name,
            "dropped": dropped,
        })))
    } else {
        print(&format!(
            "dropped {dropped} parked event(s) of projection {}\n",
            printable(&which_args.name)
        ))
    };
    Ok(if code == 0 && missing { NOT_DONE } else { code })
}

/// Asks `question` on the terminal (standard input is one): the question
/// goes to the controlling terminal, so it is seen even when standard
/// error is redirected; true for `y` or `yes`.
fn confirm(question: &str) -> bool {
    let tty = std::fs::OpenOptions::new().write(true).open("/dev/tty");
    let shown = match tty {
        Ok(mut tty) => write!(tty, "{question}").and_then(|()| tty.flush()).is_ok(),
        Err(_) => false,
    };
    if !shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{question}");
        let _ = err.flush();
    }
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes")
}
