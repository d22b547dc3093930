//! What a clap tool offers besides its commands: shell completions and a
//! manual page, both generated from the command-line definition.

use crate::cli;
use crate::{exit, print_stdout, report};

/// `eventsource completions SHELL`: the script on stdout, offering the
/// commands `--help` lists: not the hidden, internal ones (`watchdog`,
/// `demo-worker`), which clap_complete would offer too.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut out = Vec::new();
    let mut shown = without_hidden(&cli::command());
    clap_complete::generate(shell, &mut shown, "eventsource", &mut out);
    emit(out)
}

/// `command` without its hidden subcommands, at any depth. clap cannot
/// remove a subcommand, so a command that has hidden ones is built again
/// from what completions read of it (name, about, version, aliases,
/// arguments, the visible subcommands); any other is kept as it is.
fn without_hidden(command: &clap::Command) -> clap::Command {
    if !command.get_subcommands().any(|c| c.is_hide_set()) {
        return command.clone().mut_subcommands(|sub| without_hidden(&sub));
    }
    let mut shown = clap::Command::new(leaked(command.get_name()))
        .args(command.get_arguments().cloned())
        .subcommands(
            command
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(without_hidden),
        )
        .visible_aliases(command.get_visible_aliases().map(leaked))
        .propagate_version(command.is_propagate_version_set());
    if let Some(version) = command.get_version() {
        shown = shown.version(leaked(version));
    }
    if let Some(about) = command.get_about() {
        shown = shown.about(about.clone());
    }
    if let Some(about) = command.get_long_about() {
        shown = shown.long_about(about.clone());
    }
    if let Some(after) = command.get_after_long_help() {
        shown = shown.after_long_help(after.clone());
    }
    shown
}

/// `eventsource man [COMMAND...]`: the manual page (roff) on stdout, of
/// eventsource or of one of its subcommands (`lock run`: the page
/// `eventsource-lock-run(1)`, which the pages above it refer to).
pub fn man_page(path: &[String]) -> i32 {
    let mut command = cli::command();
    command.build();
    let mut page = command;
    for name in path {
        let visible = page
            .get_subcommands()
            .find(|c| c.get_name() == name && !c.is_hide_set())
            .cloned();
        match visible {
            Some(sub) => page = sub,
            None => {
                report!(
                    "no manual page for `eventsource {}`: try `eventsource --help` for the \
                     commands",
                    path.join(" ")
                );
                return exit::USAGE;
            }
        }
    }
    let title = std::iter::once("eventsource")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    // Every page comes from the tool: clap_mangen's default source is the
    // page's own command name ("run 0.1.0").
    let source = format!("eventsource {}", env!("CARGO_PKG_VERSION"));
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(page).title(title).source(source);
    if let Err(e) = man.render(&mut out) {
        report!("cannot render the manual page: {e}");
        return exit::SOFTWARE;
    }
    emit(out)
}

/// A name for clap (built without its `string` feature, its names are
/// `&'static str`): leaked, once per name of a command that prints a
/// script and exits.
fn leaked(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn emit(bytes: Vec<u8>) -> i32 {
    match String::from_utf8(bytes) {
        Ok(text) => print_stdout(&text).err().unwrap_or(0),
        Err(_) => {
            report!("the generated text is not UTF-8");
            exit::SOFTWARE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(command: &clap::Command) -> Vec<String> {
        command
            .get_subcommands()
            .flat_map(|c| std::iter::once(c.get_name().to_owned()).chain(names(c)))
            .collect()
    }

    #[test]
    fn completions_offer_every_visible_command_and_no_hidden_one() {
        let full = cli::command();
        let shown = without_hidden(&full);
        let shown_names = names(&shown);
        assert!(!shown_names
            .iter()
            .any(|n| n == "watchdog" || n == "demo-worker"));
        let visible: Vec<String> = full
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .flat_map(|c| std::iter::once(c.get_name().to_owned()).chain(names(c)))
            .collect();
        assert_eq!(shown_names, visible);
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut without_hidden(&full), "eventsource", &mut out);
            let script = String::from_utf8(out).unwrap();
            // `bound-ms`: the option of `watchdog` alone (`lock run
            // --watchdog` is an option of a visible command).
            assert!(
                !script.contains("demo-worker") && !script.contains("bound-ms"),
                "{shell}"
            );
            assert!(
                script.contains("database-url") && script.contains("holders"),
                "{shell}"
            );
        }
    }
}
