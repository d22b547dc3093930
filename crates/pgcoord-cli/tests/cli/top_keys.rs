//! `lock top KEY...`: positional keys limit the view to their locks (as
//! `lock holders KEY...` does), while `--key` only names locks; the help
//! lists every column the view has.

use pgcoord::lock_id_for_key;

use crate::common::*;

/// One listing of `lock top ARGS` (standard output is not a terminal).
async fn listing(db: &pgcoord_testkit::pg::TestDatabase, args: &[&str]) -> String {
    let out = output(eventsource(Some(db)).args(["lock", "top"]).args(args)).await;
    assert_eq!(out.code, 0, "{args:?}: {out:?}");
    out.stdout
}

#[tokio::test]
async fn positional_keys_limit_the_view_and_name_their_locks() {
    let db = database().await;
    let holder = session(&db, "top-keys").await;
    for key in ["alpha", "beta"] {
        holder
            .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(key)])
            .await
            .unwrap();
    }
    let beta_id = lock_id_for_key("beta").to_string();

    let only = listing(&db, &["alpha"]).await;
    let lines: Vec<&str> = only.lines().collect();
    assert_eq!(
        lines[1], "1 lock of the key given: 1 held, 0 waiting",
        "{only}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("alpha ") && l.contains(" held ")),
        "{only}"
    );
    assert!(!only.contains(&beta_id) && !only.contains("beta"), "{only}");

    // --key names a lock but leaves the others in the view.
    let named = listing(&db, &["--key", "alpha"]).await;
    assert!(
        named.lines().nth(1).unwrap().starts_with("2 locks: "),
        "{named}"
    );
    assert!(named.lines().any(|l| l.starts_with("alpha ")), "{named}");
    assert!(named.lines().any(|l| l.starts_with(&beta_id)), "{named}");

    let none = listing(&db, &["gamma", "delta"]).await;
    assert!(
        none.lines().last() == Some("none of the keys given is held or awaited"),
        "{none}"
    );
}

#[tokio::test]
async fn top_help_names_the_positional_keys_and_the_mode_column() {
    let out = output(eventsource(None).args(["lock", "top", "--help"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    for needle in ["[KEY]...", "MODE (exclusive", "--key <KEY>"] {
        assert!(
            out.stdout.contains(needle),
            "lacks {needle}:\n{}",
            out.stdout
        );
    }
}
