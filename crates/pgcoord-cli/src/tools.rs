//! What a clap tool offers besides its commands: shell completions and a
//! manual page, both generated from the command-line definition.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::{exit, print_stdout, report};

/// `eventsource completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "eventsource", &mut out);
    emit(out)
}

/// `eventsource man`: the manual page (roff) on stdout.
pub fn man_page() -> i32 {
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(Cli::command()).render(&mut out) {
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
