//! Text that others control, as the tool prints it: a parked event's
//! partition key and error (`projection dlq list|show`), the server's
//! messages (any error line), and names the server sends back (a
//! database's, a schema's) are escaped, never sent raw to the terminal,
//! and a server's huge message is cut.

use std::io::{Read, Write};

use crate::common::*;

/// ESC, BEL, CR: what must never reach a terminal raw.
fn assert_no_raw_controls(what: &str, text: &str) {
    assert!(
        !text.contains(['\x1b', '\x07', '\r']),
        "{what} holds raw control characters: {text:?}"
    );
}

/// Creates the dead-letter table (the library's DDL) and parks one event of
/// projection `orders` whose partition key, error and payload hold escape
/// sequences.
async fn park_hostile_event(db: &pgcoord_testkit::pg::TestDatabase) {
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(
            r#"CREATE TABLE "eventsource_projection_dead_letters" ("projection" TEXT NOT NULL,
                 "position" BIGINT NOT NULL, "partition_key" TEXT, "payload" JSONB,
                 "error" TEXT NOT NULL, "attempts" INTEGER NOT NULL, "behind" BIGINT,
                 "first_failure" TIMESTAMPTZ NOT NULL, "last_failure" TIMESTAMPTZ NOT NULL,
                 "replay_requested" BOOLEAN NOT NULL DEFAULT false,
                 PRIMARY KEY ("projection", "position"));
               INSERT INTO eventsource_projection_dead_letters VALUES ('orders', 1,
                 E'pk\x1b[2J', '{"k": "\u009b2J\u202e"}',
                 E'handler failed: \x1b]0;pwned\x07\x1b[31mRED\nfake: line\r\x1b[2K overwritten',
                 3, NULL, now(), now(), false)"#,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn dlq_list_and_show_escape_what_a_parked_event_holds() {
    let db = database().await;
    park_hostile_event(&db).await;

    let list = output(eventsource(Some(&db)).args(["projection", "dlq", "list", "orders"])).await;
    assert_eq!(list.code, 0, "{list:?}");
    assert_no_raw_controls("dlq list", &list.stdout);
    let row = list.stdout.lines().nth(1).unwrap();
    assert!(row.contains("pk\\u{1b}[2J"), "{row}");
    assert!(
        row.contains("handler failed: \\u{1b}]0;pwned\\u{7}\\u{1b}[31mRED"),
        "{row}"
    );
    assert!(!row.contains("fake: line"), "the first line only: {row}");

    let show =
        output(eventsource(Some(&db)).args(["projection", "dlq", "show", "orders", "1"])).await;
    assert_eq!(show.code, 0, "{show:?}");
    assert_no_raw_controls("dlq show", &show.stdout);
    assert!(
        !show.stdout.contains(['\u{9b}', '\u{202e}']),
        "{:?}",
        show.stdout
    );
    let lines: Vec<&str> = show.stdout.lines().collect();
    assert!(lines.contains(&"partition      pk\\u{1b}[2J"), "{lines:#?}");
    // The error's second line, escaped and indented under its first.
    let at = lines.iter().position(|l| l.starts_with("error ")).unwrap();
    assert_eq!(
        lines[at],
        "error          handler failed: \\u{1b}]0;pwned\\u{7}\\u{1b}[31mRED"
    );
    assert_eq!(
        lines[at + 1],
        "               fake: line\\r\\u{1b}[2K overwritten"
    );
    assert!(
        show.stdout.contains(r#""k": "\u009b2J\u202e""#),
        "{}",
        show.stdout
    );

    // JSON has the text itself (JSON-escaped by its encoder).
    let json =
        output(eventsource(Some(&db)).args(["projection", "dlq", "show", "--json", "orders", "1"]))
            .await;
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["partition"], "pk\x1b[2J", "{value}");
}

/// A server that answers every connection's startup with one FATAL error
/// of `message`, `detail` and `hint`: its port.
fn erring_server(message: String, detail: &str, hint: &str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut body = Vec::new();
    for (tag, text) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "XX000"),
        (b'M', message.as_str()),
        (b'D', detail),
        (b'H', hint),
    ] {
        body.push(tag);
        body.extend_from_slice(text.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut reply = vec![b'E'];
    reply.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
    reply.extend_from_slice(&body);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut s) = stream else { continue };
            // An SSLRequest or GSSENCRequest is declined; the startup
            // message gets the error.
            loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    break;
                }
                let mut rest = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                if s.read_exact(&mut rest).is_err() {
                    break;
                }
                if rest[..4] == 80877103u32.to_be_bytes() || rest[..4] == 80877104u32.to_be_bytes()
                {
                    let _ = s.write_all(b"N");
                    continue;
                }
                let _ = s.write_all(&reply);
                break;
            }
        }
    });
    port
}

async fn holders_against(port: u16) -> Output {
    output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                format!("postgres://app@127.0.0.1:{port}/app"),
            )
            .args(["lock", "holders"]),
    )
    .await
}

#[tokio::test]
async fn a_server_message_detail_and_hint_are_escaped() {
    let port = erring_server(
        "no entry \x1b]0;pwned\x07\x1b[2J".into(),
        "detail \x1b[31m\u{202e}",
        "hint \x1b[2K\r",
    );
    let out = holders_against(port).await;
    assert_ne!(out.code, 0, "{out:?}");
    assert_no_raw_controls("the error line", &out.stderr);
    assert!(!out.stderr.contains('\u{202e}'), "{:?}", out.stderr);
    for shown in [
        "no entry \\u{1b}]0;pwned\\u{7}\\u{1b}[2J",
        "detail \\u{1b}[31m\\u{202e}",
        "hint \\u{1b}[2K",
    ] {
        assert!(out.stderr.contains(shown), "{shown}: {}", out.stderr);
    }
}

#[tokio::test]
async fn a_huge_server_message_is_cut_with_a_note() {
    let port = erring_server("y".repeat(50 << 20), "the detail", "the hint");
    let out = holders_against(port).await;
    assert_ne!(out.code, 0, "{}", &out.stderr[..200.min(out.stderr.len())]);
    assert!(out.stderr.len() < 64 << 10, "{} bytes", out.stderr.len());
    assert!(
        out.stderr.contains("more bytes not shown"),
        "{:.300}",
        out.stderr
    );
    assert!(out.stderr.contains("the hint"), "{:.300}", out.stderr);
}

#[tokio::test]
async fn a_database_name_the_server_repeats_is_escaped() {
    let db = database().await;
    let url = db.url();
    let (base, _) = url.rsplit_once('/').unwrap();
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", format!("{base}/nosuch%1B%5D0%3Bpwned%07"))
            .args(["lock", "holders"]),
    )
    .await;
    assert_ne!(out.code, 0, "{out:?}");
    assert_no_raw_controls("the error line", &out.stderr);
    assert!(
        out.stderr
            .contains(r#"database "nosuch\u{1b}]0;pwned\u{7}" does not exist"#),
        "{}",
        out.stderr
    );
}

/// A schema whose name holds an escape sequence, with a fence table and a
/// look-alike `pg_advisory_lock` in it: `lock install`'s refusal, `lock
/// top`'s header and `lock doctor`'s warning name it escaped.
#[tokio::test]
async fn a_schema_name_from_the_server_is_escaped() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(
            "CREATE SCHEMA \"evil\x1b]0;pwned\x07\"; \
             CREATE TABLE \"evil\x1b]0;pwned\x07\".eventsource_lock_fences \
               (lock_id bigint PRIMARY KEY, key text NOT NULL, fence bigint NOT NULL); \
             CREATE FUNCTION \"evil\x1b]0;pwned\x07\".pg_advisory_lock(bigint) RETURNS void \
               LANGUAGE sql AS ''",
        )
        .await
        .unwrap();
    let schema = r#""evil\u{1b}]0;pwned\u{7}""#;

    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 78, "{install:?}");
    assert_no_raw_controls("lock install", &install.stderr);
    assert!(
        install
            .stderr
            .contains(&format!("exists already in schema {schema} and")),
        "{}",
        install.stderr
    );
    // One space between words (a string continuation once kept the
    // source's indentation).
    assert!(!install.stderr.contains("  "), "{}", install.stderr);

    admin
        .batch_execute(&format!(
            "ALTER DATABASE {} SET search_path = \"evil\x1b]0;pwned\x07\", pg_catalog",
            db.name()
        ))
        .await
        .unwrap();
    let top = output(eventsource(Some(&db)).args(["lock", "top"])).await;
    assert_eq!(top.code, 0, "{top:?}");
    assert_no_raw_controls("lock top", &top.stdout);
    assert!(
        top.stdout.contains(&format!(
            "fence tokens from {schema}.eventsource_lock_fences"
        )),
        "{}",
        top.stdout
    );

    let doctor = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(doctor.code, 0, "{doctor:?}");
    assert_no_raw_controls("lock doctor", &doctor.stdout);
    let warning = doctor
        .stdout
        .lines()
        .find(|l| l.contains(".pg_advisory_lock(bigint)"))
        .unwrap_or_else(|| panic!("{}", doctor.stdout));
    assert!(warning.contains("evil\\u{1b}]0;pwned\\u{7}"), "{warning}");
}
