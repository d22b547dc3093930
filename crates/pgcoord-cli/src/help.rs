//! The help texts of `eventsource --help` and its subcommands.

pub const ABOUT: &str = "Cross-process locks on PostgreSQL advisory locks, for operators";

pub const LONG_ABOUT: &str = "\
Cross-process locks on PostgreSQL advisory locks, for operators.

Keep a cron job, a migration or a tenant cutover from running twice across
hosts (`eventsource lock run`), see who holds what when something is stuck
(`eventsource lock holders`), and watch the locks at work on a throwaway
server (`eventsource demo`).

Locks are PostgreSQL session-level advisory locks in the database the URL
names; a string KEY maps to a 64-bit lock id (`eventsource lock key`), the
same id the pgcoord library and its Python reference derive. A lock is
released when its holder releases it or when the holder's database session
ends, including when the holder crashes.";

pub const AFTER_HELP: &str = "\
Connection:
  --database-url, else the DATABASE_URL environment variable, in libpq URL
  form: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...],
  or key=value form (host=... dbname=... service=...). What it leaves out
  comes from libpq's environment, as for psql: PGHOST, PGHOSTADDR, PGPORT,
  PGUSER, PGDATABASE, PGPASSWORD, PGPASSFILE, PGAPPNAME, PGSSLMODE,
  PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, PGSSLCRL, PGSSLCRLDIR,
  PGCONNECT_TIMEOUT, PGOPTIONS, PGTARGETSESSIONATTRS, PGCHANNELBINDING,
  PGLOADBALANCEHOSTS, PGSSLNEGOTIATION, PGREQUIRESSL (=1: sslmode=require
  when no sslmode is given), PGSERVICE (a section of PGSERVICEFILE or
  ~/.pg_service.conf, then PGSYSCONFDIR/pg_service.conf); an empty
  variable counts as unset; then the defaults (a local server's socket, else localhost; port 5432;
  user = the OS user; database = the user name); a password still missing
  comes from PGPASSFILE or ~/.pgpass, which is ignored with a warning when
  its group or others may read it (chmod 0600). Without a URL the tool
  connects from that environment alone. Passwords are never printed: every
  message shows them as ***. Prefer the environment or a password file to
  --database-url, which other users can read in `ps`. TLS:
  sslmode=disable|prefer|require|verify-ca|verify-full, sslrootcert=PATH
  for the CA (default ~/.postgresql/root.crt; when it exists, require also
  checks the chain, as in libpq), and sslcert=PATH and
  sslkey=PATH for a client certificate (default ~/.postgresql/postgresql.crt
  and .key, when present; PEM or DER, not encrypted; the key must be chmod
  0600), sslcrl=PATH / sslcrldir=DIR for revocation lists checked by
  verify-ca and verify-full (default ~/.postgresql/root.crl, when present),
  as parameters or PGSSLMODE / PGSSLROOTCERT / PGSSLCERT / PGSSLKEY /
  PGSSLCRL / PGSSLCRLDIR; also
  ssl_min_protocol_version / ssl_max_protocol_version (TLSv1.2, TLSv1.3),
  sslsni, sslcompression and gssencmode=disable|prefer (or
  PGSSLMINPROTOCOLVERSION, PGSSLMAXPROTOCOLVERSION, PGSSLSNI,
  PGSSLCOMPRESSION, PGGSSENCMODE).

Logging:
  EVENTSOURCE_LOG=debug (or info, trace, a tracing filter) logs to stderr,
  one line each, as `eventsource: LEVEL: ...`; colour only on a terminal and
  without NO_COLOR. A filter that does not parse is warned about, and the
  default (warn) used.

Output:
  A failed write to standard output (a full disk, a closed pipe) is
  reported on stderr and exits with 74.

Install:
  cargo install --locked --path crates/pgcoord-cli; shell completions
  with `eventsource completions SHELL`, the manual page with `eventsource man`.";

pub const RUN_LONG_ABOUT: &str = "\
Acquire KEY, run COMMAND while holding it, release it when COMMAND and
every process it started have exited.

Waiting is fair: waiters get the lock in the order they asked for it. Without
--timeout the tool waits as long as it takes; with --timeout it gives up after
DURATION (a retry connects within what is left of it, whatever the URL's
connect_timeout), and meanwhile retries (with backoff) a server that cannot be
reached yet or whose session ends during the wait (a restart, a failover),
but not what no wait mends (a wrong password, a pg_hba.conf refusal, a TLS
failure: the server's certificate, sslrootcert, sslmode); with --no-wait it
makes a single attempt. That attempt still waits for a server to answer:
connect_timeout (10 s by default) for each of the URL's hosts in turn, then
2 s for the answer, so a frozen server exits 69 after about 10 to 13 s.

COMMAND runs as a child process with the tool's standard input, output and
error, and with two extra environment variables: EVENTSOURCE_LOCK_KEY (KEY)
and EVENTSOURCE_LOCK_ID (the decimal advisory-lock id).

Shared mode: with --shared, KEY is held shared: any number of shared runs
of KEY at once (on any host), none while an exclusive run holds it. Waits
stay in arrival order across both modes: shared runs that come after a
waiting exclusive run wait behind it, so writers are not starved. COMMAND
also gets EVENTSOURCE_LOCK_MODE=shared.

Semaphores: with --permits N, KEY names a semaphore of N permits and
COMMAND runs holding one of them, so at most N such commands run at once
across hosts. COMMAND also gets EVENTSOURCE_LOCK_PERMIT (which permit, 0 to
N-1); EVENTSOURCE_LOCK_ID is then the id of that permit's lock, the key
`KEY#permit/I`. Waiters are served in arrival order. Every user of KEY must
pass the same N: a waiter that sees a holder with a larger N exits with 78.

Several keys: with --also KEY2 (repeatable), COMMAND runs holding KEY and
every --also key at once. The set is taken all or none: --timeout is one
deadline for the whole set, --no-wait makes one attempt of the whole set,
and a run that gives up holds none of its keys. The keys are taken in one
order (by lock id) whatever order they are given in, so runs whose sets
overlap never deadlock each other. Losing any key stops the job as for one
key (exit 76); stderr names the key lost. COMMAND also gets
EVENTSOURCE_LOCK_KEYS, every key held as a JSON array in the order taken,
and EVENTSOURCE_LOCK_IDS, their lock ids in that order, space-separated;
EVENTSOURCE_LOCK_KEY and EVENTSOURCE_LOCK_ID stay KEY's. With --fence each
key gets a token of its own: EVENTSOURCE_LOCK_FENCES is a JSON object of key
to token, EVENTSOURCE_LOCK_FENCE is KEY's. --also and --permits do not
combine (a usage error).

Once per interval: with --min-interval DURATION, once KEY is held COMMAND
runs only if no run of KEY (with --also: of any key of the set; with
--permits: of the semaphore) started within DURATION before, by the database
server's clock (clock_timestamp(), so the hosts' clocks do not matter);
otherwise the run is skipped with the conflict code (75) and a line saying
when the last run started and when the next may. The start is recorded in
the fence table before COMMAND starts, so a crash still counts (a COMMAND
that could not be started at all, exit 126 or 127, ran nothing: its start is
taken back); COMMAND gets it as EVENTSOURCE_RUN_STARTED. Needs `eventsource lock install` (again, on a
database installed by an older version).

The job: COMMAND starts in a process group of its own, which the processes
it starts join unless they leave it (setsid, setpgid). The lock is released
only after every process of the group has ended, so work that COMMAND leaves
running in the background keeps the lock held.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM sent
to the tool are forwarded to the job's process group (after each but SIGUSR1
and SIGUSR2 the group also gets SIGCONT, so a stopped job ends too); one the
tool was started with ignored (nohup) stays ignored, by the job too. When
the tool has a terminal (stdin, stdout or stderr) and runs in its foreground,
the terminal is handed to the job, so a typed Ctrl-C or Ctrl-Z reaches the
job directly (a Ctrl-C or Ctrl-\\ that ends it so is then sent on to the
tool's own process group, so that a script around the tool stops too);
otherwise a SIGTSTP sent to the tool stops the job. Not when the tool is
one stage of a pipeline (`... | less`): the pipeline keeps the terminal, so
a pager or password prompt beside it works and a Ctrl-C reaches every stage,
but a job that itself reads the terminal is stopped (SIGTTIN), as a
background job would be. While the tool still waits for the lock, one of the
seven ends the wait and the tool exits with 128+N without running COMMAND.

Job control: under an interactive shell, a stopped job (Ctrl-Z) stops the
tool too, so that the shell gets its prompt back: the tool takes the terminal
back, says on stderr that the command is stopped and the lock still held, and
stops itself. The lock stays held while they are stopped; with --lease, only
for the lease, which a stopped tool cannot renew. `fg` gives the
terminal to the job again and continues it; `bg` continues it in the
background, where a job that reads the terminal is stopped again, and the
tool with it (`fg` then resumes it); `fg` of a run that still runs in the
background hands the job the terminal when it first reads it. A job stopped
only in part (a process of it ignores SIGTSTP and runs on) is not a stopped
job: the tool says so once and keeps supervising it. A lock lost while stopped (a --lease
that ran out, a session the server ended) is handled when `fg` or `bg`
continues them, as any loss: exit 76. Without a job-control shell (no
terminal, as under cron, or a tool leading a session of its own, as in
`ssh -t HOST eventsource ...`) the tool keeps supervising the stopped job
and says that it is stopped (again after each continue): `kill -CONT -PGID`
resumes it (PGID is COMMAND's pid), SIGTERM to the tool ends it.

Lock loss: if the lock's database session ends while the job runs (backend
terminated, server restarted, network cut), the job's group gets SIGTERM,
then SIGKILL if it is still running after --kill-grace, and the tool exits
with the lock-lost code (76) and says why on stderr.

The tool dying or stopping: if the tool is killed (SIGKILL, out of memory),
COMMAND gets SIGKILL from the kernel (Linux) and a watchdog process sends
SIGKILL to the rest of the group. If the tool is stopped (SIGSTOP, a
debugger, swapped out), its watchdog kills the job's group once the tool has
not answered for --watchdog: the lock may be gone meanwhile, and the job
must not go on without it. A job stopped as a whole does no work and is
spared, however long it stays stopped (a Ctrl-Z under a shell); if it runs
again while the tool is still stopped, it is killed --watchdog after it was
last seen stopped.";

pub const RUN_AFTER_HELP: &str = "\
Exit codes:
  COMMAND's code  COMMAND ran under the lock and exited (0 = success)
  128+N           COMMAND died of signal N (e.g. 137 for SIGKILL), or the tool
                  was interrupted by signal N while waiting for the lock. A
                  run a shell started in the foreground of its terminal that
                  ends so by SIGINT or SIGQUIT (Ctrl-C, Ctrl-\\) dies of that
                  signal instead, once the lock is released (one the
                  terminal sent to the job holding it is sent on to the
                  tool's own process group), so that the shell also stops
                  a loop or script around it
  2               bad usage (unknown option, bad DURATION, a bad URL or PG*
                  variable, an unknown service); nothing was connected to
  69              the database could not be reached, refused the login (a
                  role without CONNECT on the database too), failed (TLS
                  included: at once, without retrying), or did not answer
                  within --timeout
  70              internal error, or this machine's limits: an open-file
                  limit (ulimit -n) under 16, file descriptors run out
                  while connecting, no watchdog process; stderr says which
  74              writing to standard output failed (`--help` into a closed
                  pipe or a full disk); stderr says so
  75              not acquired: KEY (or a key of the --also set) is held
                  elsewhere (--no-wait) or --timeout elapsed in the server's
                  queue; stderr names the key and its holder when visible;
                  or a run skipped by --min-interval
                  (--conflict-exit-code changes it)
  76              the lock was lost while COMMAND ran or sat stopped (Ctrl-Z),
                  or the tool was stopped longer than --watchdog while
                  COMMAND ran on; the job was ended, and its work
                  may have overlapped another holder's; or, behind a pooler
                  in transaction mode, the release could not confirm the
                  lock was still held (--lost-exit-code changes it)
  77              the server cancelled the wait (pg_cancel_backend,
                  statement_timeout); COMMAND did not run
  78              the database lacks what the options need (--fence,
                  --min-interval or leader run before `eventsource lock
                  install`, or a privilege of the logged-in role on the
                  fence table: permission denied, or the role's sessions
                  read-only by default_transaction_read_only on a
                  primary), or a --permits N waiter found a holder
                  with a larger N (a larger N than the holders' is not
                  detected); COMMAND did not run
  126             COMMAND could not be executed
  127             COMMAND was not found

Examples:
  # A cron job that must not overlap itself on any host; skip if busy (exit 0,
  # one line on stderr says why):
  eventsource lock run --no-wait --conflict-exit-code 0 nightly-report -- /opt/report.sh
  # An hourly cron job on several hosts: at most one run per hour, by the
  # database's clock:
  eventsource lock run --no-wait --min-interval 50m --conflict-exit-code 0 \\
      hourly-report -- /opt/report.sh
  # A deploy step: wait up to 10 minutes for the other deploy to finish:
  eventsource lock run --timeout 10m deploy:shop -- ./migrate.sh --apply
  # A transfer between two tenants, whichever order another run names them in:
  eventsource lock run --timeout 1m tenant:7 --also tenant:3 -- ./move.sh 7 3

DURATION: a number and a unit (ns, us, ms, s, m, h, d), e.g. 500ms, 30s,
1.5s, 2m, 1h30m. Negative values, units left out, nan and inf are refused.";

pub const COMPLETIONS_LONG_ABOUT: &str = "\
Print a completion script for SHELL on standard output. For example:
  eventsource completions bash > /etc/bash_completion.d/eventsource
  eventsource completions zsh > \"${fpath[1]}/_eventsource\"
  eventsource completions fish > ~/.config/fish/completions/eventsource.fish";

pub const MAN_LONG_ABOUT: &str = "\
Print the manual page of eventsource, or of one of its commands, (roff) on
standard output. For example:
  eventsource man > /usr/local/share/man/man1/eventsource.1
  eventsource man lock run > /usr/local/share/man/man1/eventsource-lock-run.1
  eventsource man lock run | man -l -";

pub const DOCTOR_LONG_ABOUT: &str = "\
Check once that the database really gives session-level advisory locks.

Two sessions, opened as `lock run` opens them, take one random test key:
the first must keep its server session (backend pid) from one statement to
the next and see its lock in pg_locks; the second must run on another
server session and be refused the key, then get it once the first lets go.

This catches what silently breaks session locks while every call succeeds:
a transaction-mode pooler (PgBouncer with pool_mode = transaction) and
engines whose advisory functions lock nothing (CockroachDB). On success it
prints the server version, the lock table's size and the settings that
bound how long a vanished or frozen holder keeps its locks, with advice.

It also fails on a hot standby (pg_is_in_recovery(): its locks do not
exclude holders on the primary), exercises every advisory function the lock
manager calls (the blocking wait included, pg_catalog-qualified as the
manager calls them), and warns about look-alike functions outside
pg_catalog that would fool clients calling them unqualified.

Exit code: 0 when the checks pass (warnings are advice), 1 when the server
fails a check (the message names the cause), 69 when it cannot be reached,
74 when the report cannot be written.";

pub const KEY_LONG_ABOUT: &str = "\
Print the advisory-lock id of each KEY, one line per key: KEY, a tab, the
decimal lock id. Needs no database.

The id is the first 8 bytes of SHA-256(KEY), big-endian, with the top bit
cleared: the id that `lock run`, the pgcoord library and its Python
reference use, and that pg_locks shows as (classid << 32) | objid. Use it to
find a lock in pg_locks, or to take the same lock from SQL:
SELECT pg_advisory_lock(LOCK_ID).

KEY is printed escaped: a backslash as \\\\, tab and newline as \\t and \\n,
other characters that do not print (control and format characters such as
ESC or U+202E) as \\u{HEX}; every other character as it is.";

pub const HOLDERS_LONG_ABOUT: &str = "\
List the advisory locks of the database, or only those of the given KEYs:
for each lock its id, its key when given on the command line, and each
session that holds it or waits for it, waiters in queue order. Without KEYs
both forms are listed: bigint locks (as eventsource takes them), then
two-int locks, pg_advisory_lock(int, int), shown as (K1,K2).

For each session: state (held / waiting), lock mode (exclusive, or shared
with the number of sessions holding the lock shared), backend pid,
holder id (from application_name `eventsource/ID`) or application_name,
client address, and since when: for a waiter when it started waiting; for a
holder `>=` when its session connected, the earliest the lock can have been
granted (PostgreSQL does not record when a lock was granted, and a holder's
last activity is no help: a lock manager's session runs a liveness
statement twice a second). --json has that bound as `granted_not_before`;
a holder's `since` there is its last activity.

`SELECT pg_terminate_backend(PID)` ends a session and frees its locks.

Sessions of other database roles show fewer details unless the connecting
role has pg_read_all_stats.";

pub const DEMO_LONG_ABOUT: &str = "\
Watch the locks at work.

Without a database URL (--database-url or DATABASE_URL), the demo boots a
throwaway PostgreSQL from the installed server binaries (initdb, pg_ctl,
found on PATH or under /usr/lib/postgresql/VERSION/bin; on Debian and Ubuntu
`apt-get install postgresql`) in a temporary directory on a free port and
removes it at the end. With a URL it uses that database, with keys of its
own (demo:RUN:k0, ...) that no one else takes.

It starts --workers worker processes (this same program) that acquire one of
--keys keys at random, spend a few milliseconds in a critical section, and
release it, for --seconds. A status line on stderr shows acquisitions, the
current holder of each key and how many wait for it. Half-way through, one
worker stops inside its critical section and the demo kills it with SIGKILL:
PostgreSQL releases its lock when the connection drops, and the next waiter
takes over.

Every worker appends the times it enters and leaves a critical section to a
shared record. The summary at the end counts acquisitions, checks the record
for overlapping critical sections on one key (there must be none), and
reports the hand-over latency (from one holder leaving to the next waiter
entering) at p50 and p99. The end of the run is never a failure: a worker
starts no acquisition in the last 100 ms of --seconds, and a wait still
running when the time is up just ends that worker's loop.

Exit code: 0 when no overlap was found and every worker ended normally
(except the one killed), 1 otherwise, 2 on bad usage, 69 when the database
could not be reached or started, 130/143 when interrupted.";
