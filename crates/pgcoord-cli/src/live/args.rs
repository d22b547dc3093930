//! The arguments and help texts of the live views (`lock top`, `lock
//! holders --watch`): what `cli.rs` takes from here.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::duration::parse_interval;

/// `lock holders --watch [--interval DURATION]`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Keep watching: print a line for each change (held, waiting,
    /// acquired, granted, released, abandoned, left) until interrupted.
    #[arg(long)]
    pub watch: bool,

    /// With --watch, how often to look (at least 100ms).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        value_parser = parse_interval,
        allow_hyphen_values = true,
        requires = "watch",
        visible_alias = "every"
    )]
    pub interval: Duration,
}

/// `--key NAME` and `--key-file FILE`: names for lock ids in the views.
#[derive(Debug, Args)]
pub struct KeyNameArgs {
    /// Show the lock of KEY by its name (repeatable); other locks show by
    /// id. Keys the fencing table records are named too.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,

    /// Like --key, for every line of FILE (one key per line; empty lines
    /// are skipped).
    #[arg(long, value_name = "FILE")]
    pub key_file: Vec<PathBuf>,
}

/// `eventsource lock top`
#[derive(Debug, Args)]
pub struct TopArgs {
    /// How often to refresh (at least 100ms).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        value_parser = parse_interval,
        allow_hyphen_values = true,
        visible_alias = "every"
    )]
    pub interval: Duration,

    #[command(flatten)]
    pub names: KeyNameArgs,

    /// Only the locks of these keys, named (default: every advisory lock).
    #[arg(value_name = "KEY", value_parser = crate::names::parse_key)]
    pub only_keys: Vec<String>,
}

/// `lock top --help`.
pub const TOP_LONG_ABOUT: &str = "\
A live view of the database's advisory locks, like top: one row per session
that holds or waits for a lock, refreshed every --interval. Locks with
waiters come first, the longest wait first; then held locks, the longest
held first. q, Esc or Ctrl-C quits and gives the terminal back as it was.
With KEYs, only the locks of those keys (as `lock holders KEY...`); --key
and --key-file name locks without leaving the others out.

Columns: KEY (the key, when given as a KEY, with --key / --key-file or
recorded by the fencing table, else the lock id; (K1,K2) for a two-int
lock), STATE (held / waiting), MODE (exclusive, or shared for
pg_advisory_lock_shared), PID (the backend; SELECT pg_terminate_backend(PID)
frees its locks), HOLDER (the holder id of an eventsource session, else its
application_name), CLIENT (its address; `-` for a Unix socket, `?` for
another role's session, whose address and connection time PostgreSQL hides
from a role without pg_read_all_stats: its FOR shows `-`, and a line under
the table says so), FOR (how long it has held or waited), BLOCKED BY (for a waiter, the pids it waits behind) and, when the
table eventsource_lock_fences is in the search_path, FENCE (the lock's
current fencing token).

FOR for a waiter counts from when it started waiting (PostgreSQL 14 and
later). PostgreSQL does not record when a lock was granted: for a grant
this view saw, FOR counts from the refresh that first showed it; for a lock
already held when the view started, or when it reached another server (a
failover, the URL's next host), FOR shows `<=` and the age of the holder's
session, the longest it can have been held.

Each refresh is one query (pg_locks joined with pg_stat_activity). A
refresh that fails, or does not return within --interval (at least 2s, at
most 30s: \"the server did not answer within 2s\"), shows the error in the
third line, \"refresh failed at HH:MM:SS, rows as of HH:MM:SS: ...\", and
keeps the last rows (their FOR as of that listing) until one succeeds. When
standard output is not a terminal, one listing is printed and the command
exits 0. Exit codes: 0 quit, 2 bad usage (a bad --interval, an unreadable
--key-file), 69 the database cannot be reached, 74 the terminal cannot be
written.";

/// The help `lock holders --help` adds: fence tokens and `--watch`.
pub const HOLDERS_AFTER_HELP: &str = "\
Fencing: when the table eventsource_lock_fences (`eventsource lock install`)
is in the connection's search_path, a FENCE column (`fence` in JSON) shows
each lock's current fencing token, and the table names keys that were not
given. In JSON, each waiter's `blocked_by` lists the pids it waits behind.

Shared locks (pg_advisory_lock_shared): any number of sessions may hold a
lock in shared mode at once. MODE says `exclusive` or `shared`, and on a
shared holder's row how many hold the lock shared, `shared (2 holders)`; in
JSON each session has `shared` (true or false) next to `mode` (pg_locks'
name: ExclusiveLock, ShareLock), and a lock held shared has
`shared_holders`.

A semaphore's name (lock run --permits N KEY) is not locked itself: its
permits are the keys KEY#permit/0 .. KEY#permit/N-1, its queue
KEY#turnstile. A KEY given that is neither held nor awaited while those
are (among the first 256 slots) gets a line saying so (permits held, runs
waiting) and naming the `lock holders` command that lists them; `lock top
KEY` adds the same line.

With --watch: a line for each change, flushed as it is seen, until SIGINT,
SIGTERM or SIGHUP (exit 0) or until the reader of standard output goes away
(exit 0, silently; noticed within one --interval, also while nothing
changes). A signal the tool was started with ignored stays
ignored: started as `cmd &` by a script without job control (SIGINT
ignored), SIGTERM or SIGHUP ends the watch, SIGINT does not. Each line: the time it was seen, the event, then
name=value fields (key, id, pid, holder or app, client, mode (exclusive or
shared); shared_holders for a shared holder's held, acquired and granted;
blocked_by for a waiter, waited or held when known, fence when the fencing
table is read):

  held      held when the watch started
  waiting   started waiting (or was waiting when the watch started)
  acquired  taken without waiting (as far as the watch saw)
  granted   a waiter got the lock; waited= since it started waiting
  released  the holder let go or its session ended; held= when the watch
            saw the grant
  abandoned a waiter stopped waiting without the lock (timeout, cancel,
            its session ended) while the holder kept it
  left      a waiter stopped waiting while the holder let go: granted
            and released between two listings, or gave up (the listings
            cannot tell)

On a semaphore's slot keys (KEY#permit/N), the head of its queue waits on
one slot after another: a wait that moves to another slot of the same
semaphore is one wait (no abandoned/waiting pair at each move).

A refresh that fails, or does not return within --interval (at least 2s,
at most 30s), is reported once on stderr and retried every interval;
\"listing lock holders again\" follows when one succeeds. A session the
server ended (pg_terminate_backend, a restart) is said once on stderr, and
the watch goes on with a new one; the fencing table is looked up again on
each new session and when a listing finds it dropped.

With --json each line is one JSON object: time, event, lock_id, key,
fence, the session's fields as in `lock holders --json` (shared included,
and granted_not_before for a holder's held, acquired, granted and
released), shared_holders as in the text, and waited_seconds or
held_seconds. The locks are listed every --interval: a lock taken and
released in between is not seen.";
