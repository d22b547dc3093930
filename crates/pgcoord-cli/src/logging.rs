//! `tracing` output in the tool's own line format.
//!
//! Every line on stderr, the tool's own and the library's `tracing`
//! events alike, reads `eventsource: MESSAGE`; events add their level
//! (`eventsource: warning: ...`) and their fields after the message, in
//! parentheses, as words of the sentence (`... count as lost (pid 20329)`,
//! `(lock id 42, error ...)`), not as a log line's `name=value`. Colour
//! (the level word only) is used only when stderr is a terminal and
//! `NO_COLOR` is unset or empty.

use std::fmt;
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
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

/// `eventsource: LEVEL: message (field value, ...)`
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
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let (word, colour) = level_word(*event.metadata().level());
        if self.colour {
            write!(writer, "eventsource: {colour}{word}\x1b[0m: ")?;
        } else {
            write!(writer, "eventsource: {word}: ")?;
        }
        // The fields are words of the sentence, not the field formatter's.
        let mut sentence = Sentence::default();
        event.record(&mut sentence);
        writeln!(writer, "{}", sentence.render())
    }
}

/// An event's message and fields, gathered to be written as one sentence.
#[derive(Default)]
struct Sentence {
    message: String,
    fields: Vec<String>,
}

impl Sentence {
    /// `message (name value, ...)`; the fields alone, without a message.
    fn render(&self) -> String {
        let fields = self.fields.join(", ");
        match (self.message.is_empty(), fields.is_empty()) {
            (_, true) => self.message.clone(),
            (true, false) => fields,
            (false, false) => format!("{} ({fields})", self.message),
        }
    }

    /// Adds a field (or the message), as the tool shows a server's text
    /// ([`shown`](crate::error_line::shown)): the library's events carry
    /// its errors, and with them the server's words.
    fn add(&mut self, field: &Field, value: String) {
        let value = crate::error_line::shown(&value);
        if field.name() == "message" {
            self.message = value;
        } else {
            // `lock_id` reads "lock id"; `log.target` and the like as given.
            let name = field.name().replace('_', " ");
            self.fields.push(format!("{name} {value}"));
        }
    }
}

impl Visit for Sentence {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.add(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.add(field, format!("{value:?}"));
    }
}

/// The filter when `EVENTSOURCE_LOG` is unset or invalid.
const DEFAULT_FILTER: &str = "warn";

/// The `EVENTSOURCE_LOG` filter, and a warning to print when the variable
/// is set but not a filter (then [`DEFAULT_FILTER`] is used: a typo such
/// as `pgcoord=verbose` must not pass silently for "no debug output").
fn filter_from(value: Option<std::ffi::OsString>) -> (EnvFilter, Option<String>) {
    let Some(value) = value else {
        return (EnvFilter::new(DEFAULT_FILTER), None);
    };
    let problem = match value.to_str() {
        None => "it is not UTF-8".to_owned(),
        Some(text) => match EnvFilter::try_new(text) {
            Ok(filter) => return (filter, None),
            Err(e) => e.to_string(),
        },
    };
    let warning = format!(
        "warning: EVENTSOURCE_LOG={:?} is not a valid tracing filter ({problem}); using \
         \"{DEFAULT_FILTER}\" instead (e.g. EVENTSOURCE_LOG=debug or pgcoord=debug)",
        value.to_string_lossy()
    );
    (EnvFilter::new(DEFAULT_FILTER), Some(warning))
}

/// Installs the subscriber: `EVENTSOURCE_LOG` filter (default `warn`); an
/// invalid filter is said once on stderr.
pub fn init() {
    let (filter, warning) = filter_from(std::env::var_os("EVENTSOURCE_LOG"));
    if let Some(warning) = warning {
        crate::report_line(&warning);
    }
    let colour = colour_wanted();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(ScrubbingStderr)
        .with_ansi(colour)
        .event_format(ToolFormat { colour })
        .try_init();
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::{filter_from, ToolFormat};

    #[test]
    fn an_invalid_filter_is_said_and_replaced_by_the_default() {
        let (_, warning) = filter_from(Some("pgcoord=verbose".into()));
        let warning = warning.expect("a warning");
        assert!(
            warning.starts_with("warning: EVENTSOURCE_LOG=\"pgcoord=verbose\" is not a valid")
                && warning.contains("using \"warn\" instead"),
            "{warning}"
        );
        for fine in [None, Some("debug"), Some("pgcoord=debug,warn"), Some("")] {
            let (_, warning) = filter_from(fine.map(Into::into));
            assert_eq!(warning, None, "{fine:?}");
        }
        let (filter, _) = filter_from(Some("pgcoord=debug".into()));
        assert_eq!(filter.to_string(), "pgcoord=debug");
    }

    /// What `emit` logs through the tool's format, without colour.
    fn logged(emit: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .event_format(ToolFormat { colour: false })
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// Fields read as words of the sentence, like the tool's own lines,
    /// not as a log line's `pid=20329`.
    #[test]
    fn fields_are_part_of_the_sentence() {
        let line = logged(|| {
            tracing::warn!(
                pid = 20329,
                "lock session's lease ran out unconfirmed; its locks count as lost"
            )
        });
        assert_eq!(
            line,
            "eventsource: warning: lock session's lease ran out unconfirmed; its locks count \
             as lost (pid 20329)\n"
        );
        let error = std::io::Error::other("connection refused");
        let line = logged(|| tracing::warn!(lock_id = 42, error = %error, "lock batch failed"));
        assert_eq!(
            line,
            "eventsource: warning: lock batch failed (lock id 42, error connection refused)\n"
        );
        let line = logged(|| tracing::info!(key = "nightly", "acquired"));
        assert_eq!(line, "eventsource: info: acquired (key nightly)\n");
        let line = logged(|| tracing::warn!("no fields"));
        assert_eq!(line, "eventsource: warning: no fields\n");
        assert!(!logged(|| tracing::warn!(pid = 1, "x")).contains('='));
    }
}
