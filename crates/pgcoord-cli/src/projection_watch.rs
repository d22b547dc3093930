//! `eventsource projection status --watch`: a line every `--every`, and
//! the progress bar on a terminal. A look that fails (a restart, a
//! failover, a server that stays silent) is said once, the watch goes on
//! with a new session, and says when it reads again, as `lock holders
//! --watch` and `leader show --watch` do. A signal ends it at once, even
//! in the middle of a look.

use std::io::IsTerminal;

use pgcoord::inspect::connect_for_inspection;
use pgcoord::readmodels::postgres::ProjectionStatus;
use pgcoord::Error;
use tokio_postgres::Client;

use crate::db::{self, answered_within, refresh_within, Database};
use crate::duration::format_duration;
use crate::projection_args::ProjectionStatusArgs;
use crate::projection_reads::look;
use crate::projection_render::{clear_bar, draw_bars, json, line};
use crate::signals::Signals;
use crate::watch_session::WatchSession;
use crate::{exit, report};

/// What one look saw: the projection's status and its rebuild's.
pub type Seen = (ProjectionStatus, Option<ProjectionStatus>);

/// The warning that a hot standby cannot show who runs the projection.
pub fn warn_standby() {
    report!(
        "{}, so who runs the projection cannot be seen here (its checkpoint and lag \
         can); point the URL at the primary to see the runner",
        db::STANDBY_WARNING
    );
}

/// One `--watch` of a projection.
pub struct Watch<'a> {
    pub args: &'a ProjectionStatusArgs,
    pub db: &'a Database,
    /// Whether the server read is a hot standby (looked at again with
    /// every new session: a failover turns one into a primary).
    pub standby: bool,
}

impl Watch<'_> {
    /// Prints `first`, then a line per look until a signal or a closed
    /// standard output; returns the exit code.
    pub async fn run(mut self, client: Client, first: Seen) -> i32 {
        let bar = std::io::stderr().is_terminal();
        let mut signals = match Signals::catch() {
            Ok(s) => s,
            Err(e) => {
                report!("cannot catch signals: {e}");
                return exit::SOFTWARE;
            }
        };
        let limit = refresh_within(self.args.every);
        let mut session = WatchSession::Open(client);
        let mut seen = Some(first);
        // Looks fail in a row (an outage): said once, and once when it ends.
        let mut failing = false;
        loop {
            if let Some((status, rebuild)) = seen.take() {
                if let Err(code) = self.show(&status, rebuild.as_ref(), bar) {
                    return code;
                }
            }
            let next = async {
                tokio::time::sleep(self.args.every).await;
                answered_within(limit, self.look(&mut session)).await
            };
            let looked = tokio::select! {
                sig = signals.recv() => {
                    if bar {
                        eprintln!();
                    }
                    return exit::watch_ended_by(sig);
                }
                looked = next => looked,
            };
            if crate::reader_gone::stdout_reader_gone() {
                // The reader left (`| head -n 3`) while nothing was written
                // (an outage, which is said once): noticed all the same.
                return 0;
            }
            match looked {
                Ok(s) => {
                    if std::mem::take(&mut failing) {
                        report!("reading projection {:?} again", self.args.name);
                    }
                    seen = Some(s);
                }
                Err(e) => {
                    // A session that failed or stayed silent is not used
                    // again (one being opened goes on: `WatchSession`).
                    session.forget_open();
                    if !std::mem::replace(&mut failing, true) {
                        if bar {
                            clear_bar();
                        }
                        report!(
                            "{}; trying again every {}",
                            db::describe_failure(
                                "cannot read the projection's status",
                                Some(self.db),
                                &e
                            ),
                            format_duration(self.args.every)
                        );
                    }
                }
            }
        }
    }

    /// One look, on the session of the last one or on a new one.
    async fn look(&mut self, session: &mut WatchSession) -> Result<Seen, Error> {
        let (options, timeout) = (self.db.inspection_options(), self.db.connect_timeout());
        let (client, fresh) = session
            .get(move || connect_for_inspection(options, timeout))
            .await?;
        if fresh {
            let standby = db::in_recovery(client).await?;
            if standby && !self.standby {
                warn_standby();
            }
            self.standby = standby;
        }
        look(client, self.args).await
    }

    /// A look's line on standard output, its bar on standard error.
    fn show(
        &self,
        status: &ProjectionStatus,
        rebuild: Option<&ProjectionStatus>,
        bar: bool,
    ) -> Result<(), i32> {
        let text = match self.args.json {
            true => format!("{}\n", json(status, rebuild, self.standby)),
            false => line(status, rebuild, self.standby),
        };
        if bar {
            // The bar of the last look goes before the next line.
            clear_bar();
        }
        crate::print_stdout(&text)?;
        if bar {
            draw_bars(status, rebuild, true);
        }
        Ok(())
    }
}
