//! The live views of the advisory locks: `lock top` (a terminal view) and
//! `lock holders --watch` (a line per change). Both list the locks with one
//! statement per refresh through one inspection session.
//!
//! Imports point one way: `top` and `watch` use `frame`, `track` and
//! `inspect`, which use `args`; `track` uses `mode` (exclusive or shared),
//! which uses nothing of these, nor does `args`.

pub mod args;
pub mod frame;
pub mod inspect;
pub mod mode;
pub mod top;
pub mod track;
pub mod watch;
