//! Misuse of `#[derive(ReadModel)]` is a compile error with a clear
//! message; each case's expected message is its `.stderr` file. The cases
//! in `tests/pass/` compile and run.

#[test]
fn misuse_is_a_compile_error_and_the_crate_path_is_used() {
    // One set of cases, so trybuild compiles the dependencies once (in
    // build mode, which the passing cases need) for both kinds.
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    // `#[read_model(crate = "...")]` through a re-export compiles and runs;
    // `ui/wrong_crate_path.rs` shows the path is not ignored.
    t.pass("tests/pass/*.rs");
}
