//! `cargo bench`: the benchmark binary's run, as a `harness = false` bench
//! target. Cargo adds `--bench` to the arguments; it is dropped here, and
//! everything after `cargo bench --` goes to the benchmark's own command
//! line (`cargo bench -- --quick`, `cargo bench -- --plots docs/plots`).

fn main() -> std::process::ExitCode {
    pgcoord_bench::main_with(std::env::args_os().filter(|a| a != "--bench"))
}
