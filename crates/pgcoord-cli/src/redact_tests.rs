//! Tests of `redact.rs`: every form a password takes, masked whole.

use super::*;

#[test]
fn finds_passwords_in_every_form() {
    assert_eq!(
        passwords_in("postgres://app:s3cr%40t@db:5432/app?sslmode=disable"),
        vec!["s3cr%40t"]
    );
    assert_eq!(
        passwords_in("postgres://app@db/app?sslmode=disable&password=pw1"),
        vec!["pw1"]
    );
    assert_eq!(
        passwords_in("host=db user=app password='a b' dbname=x"),
        vec!["a b"]
    );
    assert_eq!(
        passwords_in("host=db user=app password = spaced dbname=x"),
        vec!["spaced"]
    );
    assert_eq!(
        scrub("host=db password =  'a b' password=c dbname=x"),
        "host=db password =  *** password=*** dbname=x"
    );
    assert!(passwords_in("postgres://app@db/app").is_empty());
    assert!(passwords_in("postgres://db/app").is_empty());
}

#[test]
fn redacts_urls_and_scrubs_messages() {
    register_url("postgres://alice:Tr0ub4dor%263@db.internal:5432/app");
    assert_eq!(
        redact_url("postgres://alice:Tr0ub4dor%263@db.internal:5432/app"),
        "postgres://alice:***@db.internal:5432/app"
    );
    assert_eq!(
        redact_url("postgresql://bob@h/db?password=xyz987&sslmode=require"),
        "postgresql://bob@h/db?password=***&sslmode=require"
    );
    // Decoded form too, as a driver error might print it.
    assert_eq!(
        scrub_secrets("password authentication failed: Tr0ub4dor&3 rejected"),
        "password authentication failed: *** rejected"
    );
    assert_eq!(scrub_secrets("raw Tr0ub4dor%263 here"), "raw *** here");
    assert_eq!(
        redact_url("postgres://alice@db/app"),
        "postgres://alice@db/app"
    );
}

#[test]
fn a_password_that_is_a_common_word_garbles_nothing() {
    register_url("postgres://common:postgres@127.0.0.1/postgres");
    register_url("postgres://u:e@127.0.0.1/evident");
    let line = "cannot connect to postgres://common:postgres@127.0.0.1/postgres: \
                error connecting to server: Connection refused";
    let want = "cannot connect to postgres://common:***@127.0.0.1/postgres: \
                error connecting to server: Connection refused";
    assert_eq!(scrub(line), want);
    assert_eq!(scrub_secrets(line), want);
    assert_eq!(
        scrub_secrets("the server refused: e is wrong (user \"u\"), see evident"),
        "the server refused: *** is wrong (user \"u\"), see evident"
    );
    assert_eq!(
        scrub_secrets("eventsource: the key escaped every check"),
        "eventsource: the key escaped every check"
    );
    assert_eq!(
        scrub("host=h user=u password=e dbname=evident"),
        "host=h user=u password=*** dbname=evident"
    );
}

#[test]
fn a_password_of_any_character_is_masked_in_a_url_given_whole() {
    for pw in [
        "Sec'retXYZ",
        "Sec\"retXYZ",
        "Sec`retXYZ",
        "Sec retXYZ",
        "Sec/retXYZ",
        "Sec?retXYZ",
        "Sec#retXYZ",
        "P@ss:w/o%rd#x'y z",
    ] {
        let url = format!("postgres://app:{pw}@127.0.0.1:56101/app?sslmode=x");
        let shown = redact_url(&url);
        assert!(
            !shown.contains("retXYZ") && !shown.contains("rd#x"),
            "{shown}"
        );
        assert!(shown.starts_with("postgres://app:***@"), "{shown}");
        // And as free text, as a message that quotes the URL would
        // (a space ends a URL there: the message built from a given
        // URL uses `redact_url`, above).
        if pw.contains(' ') {
            continue;
        }
        let line = scrub(&format!(
            "invalid connection settings (database URL {url}): bad"
        ));
        assert!(!line.contains("retXYZ") && !line.contains("rd#x"), "{line}");
    }
    // key=value: a backslash escapes a space, quotes of either kind.
    for kv in [
        "password=Sec\\ retXYZ sslmode=x",
        "password='Sec retXYZ' sslmode=x",
        "password=\"Sec retXYZ\" sslmode=x",
        "password='it\\'s retXYZ' sslmode=x",
    ] {
        let line = format!("host=h user=app {kv}");
        for shown in [redact_url(&line), scrub(&line)] {
            assert!(!shown.contains("retXYZ"), "{shown}");
            assert!(shown.ends_with(" sslmode=x"), "{shown}");
        }
    }
    // An ordinary URL keeps its host and database.
    assert_eq!(
        scrub("cannot reach postgres://u:p@db.internal:5432/app?x=1 (timeout)"),
        "cannot reach postgres://u:***@db.internal:5432/app?x=1 (timeout)"
    );
    assert_eq!(
        scrub("see postgres://db/app and a@b"),
        "see postgres://db/app and a@b"
    );
}

#[test]
fn percent_decoding_is_lenient() {
    assert_eq!(percent_decode("a%40b"), "a@b");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz"), "%zz");
    assert_eq!(percent_decode("%4"), "%4");
}

#[test]
fn sslpassword_and_percent_encoded_names_are_masked_like_password() {
    for (given, want) in [
        (
            "postgres://app@db.example/app?sslpassword=SECRET9",
            "postgres://app@db.example/app?sslpassword=***",
        ),
        (
            "host=db sslpassword=SECRET9 user=u",
            "host=db sslpassword=*** user=u",
        ),
        (
            "postgres://app@db.example/app?pass%77ord=OTHERSECRET&port=abc",
            "postgres://app@db.example/app?pass%77ord=***&port=abc",
        ),
        (
            "postgres://app@h/app?%73slPASSWORD=SECRET9&x=1",
            "postgres://app@h/app?%73slPASSWORD=***&x=1",
        ),
    ] {
        assert_eq!(redact_url(given), want);
        assert_eq!(scrub(given), want);
    }
    assert_eq!(
        passwords_in("postgres://h/app?pass%77ord=OTHERSECRET&sslpassword=SECRET9"),
        vec!["OTHERSECRET", "SECRET9"]
    );
    // Other names that merely end in `password` are left alone.
    assert_eq!(scrub("host=h mypassword=x"), "host=h mypassword=x");
}

/// Found by fuzzing: a line holding many `://` and no space (a server's
/// message, a 128 KiB argument) was searched to its end once for each
/// `://`, and took seconds (minutes for a megabyte).
#[test]
fn a_long_line_of_urls_is_scrubbed_in_linear_time() {
    let line = "://".repeat(128 * 1024 / 3);
    let start = std::time::Instant::now();
    assert_eq!(scrub_secrets(&line), line);
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    // Each URL still masks its own password, up to the word's last `@`.
    assert_eq!(
        scrub("a://u:p@h b://v:q/r@s c://w"),
        "a://u:***@h b://v:***@s c://w"
    );
}
