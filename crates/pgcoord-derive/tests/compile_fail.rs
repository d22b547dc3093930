//! Misuse of `#[derive(ReadModel)]` is a compile error with a clear
//! message; each case's expected message is its `.stderr` file.

#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
