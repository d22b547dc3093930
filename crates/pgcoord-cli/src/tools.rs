//! What a clap tool offers besides its commands: shell completions and a
//! manual page, both generated from the command-line definition.

use crate::cli;
use crate::{exit, print_stdout, report};

/// `eventsource completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cli::command(), "eventsource", &mut out);
    emit(out)
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

fn emit(bytes: Vec<u8>) -> i32 {
    match String::from_utf8(bytes) {
        Ok(text) => print_stdout(&text).err().unwrap_or(0),
        Err(_) => {
            report!("the generated text is not UTF-8");
            exit::SOFTWARE
        }
    }
}
