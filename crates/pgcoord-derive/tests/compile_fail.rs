//! Misuse of `#[derive(ReadModel)]` is a compile error with a clear
//! message; each case's expected message is its `.stderr` file. The cases
//! in `tests/pass/` compile and run.

#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

#[test]
fn crate_path_is_used_for_the_generated_code() {
    // `#[read_model(crate = "...")]` through a re-export compiles and runs;
    // `ui/wrong_crate_path.rs` shows the path is not ignored.
    let t = trybuild::TestCases::new();
    t.pass("tests/pass/*.rs");
}
