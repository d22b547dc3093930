//! Clap's usage errors, made fit to print: a value typed on the command
//! line is escaped as every text others control is (see
//! [`printable`](crate::printable): a newline shows as `\n`, ESC as
//! `\u{1b}`, so that no escape sequence reaches the terminal and two
//! different values never print the same), a value too long to read back
//! (a 128 KiB key) is shortened, and the usage line does not show
//! `--database-url` as if it were required when it came from
//! `DATABASE_URL` (clap lists every option it found a value for).

use clap::error::{ContextKind, ContextValue};

/// Values longer than this many bytes are shortened.
const LONGEST_SHOWN: usize = 100;
/// How many characters of a shortened value are kept.
const KEPT_CHARS: usize = 60;

/// `value` itself when short, else its first characters (escaped, see
/// [`printable`](crate::printable)) and its length.
pub fn shorten(value: &str) -> Option<String> {
    if value.len() <= LONGEST_SHOWN {
        return None;
    }
    let kept = crate::printable::shortened(value, KEPT_CHARS + 1);
    Some(format!("{kept} ({} bytes)", value.len()))
}

/// `value` as a usage error shows it: escaped, and shortened when long
/// (any password masked first, so that a cut cannot leave part of one
/// behind).
fn shown(value: &str) -> String {
    if value.len() <= LONGEST_SHOWN {
        return crate::printable::printable(value);
    }
    let masked = crate::redact::scrub_secrets(value);
    shorten(&masked).unwrap_or_else(|| crate::printable::printable(&masked))
}

/// `err` with the values typed on the command line escaped and shortened
/// (see [`shown`]), in clap's tips too (`to pass '-x' as a value, use
/// '-- -x'`), and, unless the command line named `--database-url`
/// (`url_typed`), the option left out of the usage line.
pub fn tidy(mut err: clap::Error, url_typed: bool) -> clap::Error {
    let mut replaced = Vec::new();
    for kind in [
        ContextKind::InvalidValue,
        ContextKind::InvalidArg,
        ContextKind::InvalidSubcommand,
    ] {
        if let Some(ContextValue::String(v)) = err.get(kind) {
            let fit = shown(v);
            if fit != *v {
                replaced.push((v.clone(), fit.clone()));
                err.insert(kind, ContextValue::String(fit));
            }
        }
    }
    if let Some(ContextValue::StyledStrs(tips)) = err.get(ContextKind::Suggested) {
        let tips: Vec<clap::builder::StyledStr> = tips
            .iter()
            .map(|tip| {
                let mut text = tip.ansi().to_string();
                for (raw, fit) in &replaced {
                    text = text.replace(raw.as_str(), fit);
                }
                text.into()
            })
            .collect();
        err.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
    }
    if !url_typed {
        if let Some(ContextValue::StyledStr(usage)) = err.get(ContextKind::Usage) {
            let plain = usage.to_string();
            let cut = without_url(&plain);
            if cut != plain {
                err.insert(ContextKind::Usage, ContextValue::StyledStr(cut.into()));
            }
        }
    }
    err
}

/// The usage text without ` --database-url <URL>`.
fn without_url(usage: &str) -> String {
    usage.replace(" --database-url <URL>", "")
}

/// Whether the command line (before a `--`) names `--database-url`.
pub fn url_typed(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    args.into_iter().skip(1).take_while(|a| a != "--").any(|a| {
        let a = a.to_string_lossy();
        a == "--database-url" || a.starts_with("--database-url=")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> clap::Error {
        crate::cli::try_parse_from(std::iter::once("eventsource").chain(args.iter().copied()))
            .expect_err("a usage error")
    }

    #[test]
    fn a_long_value_is_shortened_to_its_start_and_length() {
        assert_eq!(shorten("short"), None);
        let long = format!("é{}", "k".repeat(130_000));
        let short = shorten(&long).unwrap();
        assert_eq!(short, format!("é{}… (130002 bytes)", "k".repeat(59)));
        let key = "k".repeat(131_051);
        let text = tidy(parse(&["lock", "run", &key, "true"]), false)
            .render()
            .to_string();
        assert!(text.len() < 1000, "{text}");
        assert!(
            text.contains(&format!(
                "invalid value '{}… (131051 bytes)'",
                "k".repeat(60)
            )),
            "{text}"
        );
        assert!(text.contains("KEY is 131051 bytes"), "{text}");
    }

    #[test]
    fn a_value_that_does_not_print_is_escaped_in_the_error_and_its_tip() {
        // The text as clap writes it to a terminal (its own styles kept),
        // and that text without them.
        let text = |args: &[&str]| {
            let styled = tidy(parse(args), false).render();
            let pair = (styled.ansi().to_string(), styled.to_string());
            pair
        };
        let (styled, plain) = text(&["leader", "run", "a\nb", "--", "true"]);
        assert!(plain.contains("invalid value 'a\\nb'"), "{plain}");
        assert!(!styled.contains("a\nb"), "{styled}");
        // Two values that differ print differently (clap alone dropped the
        // ESC sequence when not on a terminal, and sent it on one).
        let (styled, plain) = text(&["leader", "run", "a\u{1b}[31mb", "--", "true"]);
        assert!(plain.contains("'a\\u{1b}[31mb'"), "{plain}");
        assert!(!styled.contains("\u{1b}[31mb"), "{styled}");
        // An unknown option: the error and its tip ("to pass ... as a value").
        let (styled, plain) = text(&["lock", "holders", "--\u{1b}x"]);
        assert!(!styled.contains("\u{1b}x"), "{styled}");
        assert!(plain.contains("'--\\u{1b}x' found"), "{plain}");
        assert!(plain.contains("use '-- --\\u{1b}x'"), "{plain}");
        let long = format!("\u{1b}{}", "k".repeat(200));
        let (_, plain) = text(&["leader", "run", &long, "--", "true"]);
        assert!(plain.contains("'\\u{1b}kk"), "{plain}");
        assert!(plain.contains("… (201 bytes)'"), "{plain}");
    }

    #[test]
    fn the_usage_line_leaves_out_a_url_not_typed() {
        let args = [
            "projection",
            "status",
            "--database-url",
            "postgres://h/d",
            "--every",
            "1s",
            "o",
        ];
        let usage = |url_typed| {
            let text = tidy(parse(&args), url_typed).render().to_string();
            text.lines()
                .find(|l| l.starts_with("Usage: "))
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            usage(false),
            "Usage: eventsource projection status --watch --every <DURATION> <NAME>"
        );
        assert!(usage(true).contains("--database-url <URL>"));
    }

    #[test]
    fn only_the_tools_own_arguments_count_as_typing_the_url() {
        let typed = |args: &[&str]| url_typed(args.iter().map(|a| a.into()));
        assert!(typed(&[
            "eventsource",
            "--database-url",
            "x",
            "lock",
            "holders"
        ]));
        assert!(typed(&[
            "eventsource",
            "lock",
            "holders",
            "--database-url=x"
        ]));
        assert!(!typed(&["eventsource", "lock", "holders"]));
        assert!(!typed(&[
            "eventsource",
            "lock",
            "run",
            "k",
            "--",
            "cmd",
            "--database-url"
        ]));
    }
}
