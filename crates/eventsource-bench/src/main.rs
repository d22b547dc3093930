//! `eventsource-bench`: the lock manager against the raw-SQL limit and sqlx,
//! side by side in one run (issues 4 and 9). See `docs/performance.md`.
//!
//! ```text
//! cargo run --release -p eventsource-bench -- [--json PATH] [--quick] [--only a,b] [--plots DIR]
//! cargo bench -p eventsource-bench [-- --quick ...]   # the same, as benches/locks.rs
//! ```

fn main() -> std::process::ExitCode {
    eventsource_bench::main_with(std::env::args_os())
}
