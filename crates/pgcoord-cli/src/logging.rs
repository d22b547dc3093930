//! `tracing` output in the tool's own line format.
//!
//! Every line on stderr, the tool's own and the library's `tracing`
//! events alike, reads `eventsource: MESSAGE`; events add their level
//! (`eventsource: warning: ...`) and their fields as `name=value`. Colour
//! (the level word only) is used only when stderr is a terminal and
//! `NO_COLOR` is unset or empty.

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

use crate::redact::ScrubbingStderr;

/// Whether to colour stderr: a terminal, and no `NO_COLOR` (no-color.org).
pub fn colour_wanted() -> bool {
    let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_colour && std::io::stderr().is_terminal()
}

/// `eventsource: LEVEL: message field=value ...`
#[derive(Debug, Clone, Copy)]
struct ToolFormat {
    colour: bool,
}

fn level_word(level: Level) -> (&'static str, &'static str) {
    match level {
        Level::ERROR => ("error", "\x1b[31m"),
        Level::WARN => ("warning", "\x1b[33m"),
        Level::INFO => ("info", "\x1b[32m"),
        Level::DEBUG => ("debug", "\x1b[34m"),
        Level::TRACE => ("trace", "\x1b[35m"),
    }
}

impl<S, N> FormatEvent<S, N> for ToolFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let (word, colour) = level_word(*event.metadata().level());
        if self.colour {
            write!(writer, "eventsource: {colour}{word}\x1b[0m: ")?;
        } else {
            write!(writer, "eventsource: {word}: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Installs the subscriber: `EVENTSOURCE_LOG` filter (default `warn`).
pub fn init() {
    let filter =
        EnvFilter::try_from_env("EVENTSOURCE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let colour = colour_wanted();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(ScrubbingStderr)
        .with_ansi(colour)
        .event_format(ToolFormat { colour })
        .try_init();
}
