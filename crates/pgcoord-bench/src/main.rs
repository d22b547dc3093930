//! `pgcoord-bench`: the lock manager against the raw-SQL limit and sqlx,
//! side by side in one run (issues 4 and 9). See `docs/performance.md`.
//!
//! ```text
//! cargo run --release -p pgcoord-bench -- [--json PATH] [--quick] [--only a,b] [--plots DIR]
//! cargo bench -p pgcoord-bench [-- --quick ...]   # the same, as benches/locks.rs
//! ```

fn main() -> std::process::ExitCode {
    pgcoord_bench::main_with(std::env::args_os())
}
