//! The machine's limits on this process, as the tool meets them: the
//! open-file limit (`ulimit -n`) checked before anything starts, and a
//! connection that failed because this process ran out of file
//! descriptors, which is no fault of the server and no reason to retry.

use nix::sys::resource::{getrlimit, Resource};
use pgcoord::Error;

/// The fewest open files the tool runs with: its runtime and signal
/// handling, the watchdog's pipe, a command's standard streams and a few
/// database sessions (about 15 are in use at once in `lock run`).
pub const MIN_OPEN_FILES: u64 = 16;

/// The hint for a connection that failed for want of file descriptors.
pub const OUT_OF_DESCRIPTORS_HINT: &str = "this process ran out of file descriptors, not the \
    server: raise the open-file limit (ulimit -n) or open fewer sessions";

/// `Err` with the line to print when the soft open-file limit is below
/// [`MIN_OPEN_FILES`]: past it, the runtime, the signal handlers or the
/// first connection would fail, some of them with a panic.
pub fn check_open_files() -> Result<(), String> {
    let Ok((soft, _hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    if soft >= MIN_OPEN_FILES {
        return Ok(());
    }
    Err(format!(
        "the open-file limit of this process is {soft} (ulimit -n); the tool needs at least \
         {MIN_OPEN_FILES}"
    ))
}

/// True when `err` is a failure of this process to open a socket or a
/// file: too many open files, in the process (EMFILE) or the system
/// (ENFILE).
pub fn out_of_descriptors(err: &Error) -> bool {
    let Some(backend) = err.as_backend() else {
        return false;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = match backend.driver_error() {
        Some(e) => Some(e),
        None => None,
    };
    while let Some(e) = source {
        let errno = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error);
        if errno.is_some_and(is_descriptor_limit) {
            return true;
        }
        source = e.source();
    }
    // A driver error not kept (a copy of the error): its words.
    ["(os error 24)", "(os error 23)"]
        .iter()
        .any(|code| backend.message().contains(code))
}

/// EMFILE or ENFILE.
fn is_descriptor_limit(errno: i32) -> bool {
    errno == nix::errno::Errno::EMFILE as i32 || errno == nix::errno::Errno::ENFILE as i32
}

#[cfg(test)]
mod tests {
    use pgcoord::error::{BackendError, BackendErrorKind};

    use super::*;

    fn connect_error(driver: std::io::Error) -> Error {
        Error::Backend(
            BackendError::new(BackendErrorKind::Connect, "cannot connect to the database")
                .with_driver_error(driver),
        )
    }

    #[test]
    fn a_connect_failing_for_want_of_descriptors_is_this_process_not_the_server() {
        let e = connect_error(std::io::Error::from_raw_os_error(24));
        assert!(out_of_descriptors(&e));
        assert_eq!(crate::exit::for_error(&e), crate::exit::SOFTWARE);
        assert_eq!(crate::exit::backend_hint(&e), Some(OUT_OF_DESCRIPTORS_HINT));
        // A refused connection is the server's (or the URL's) affair.
        let refused = connect_error(std::io::ErrorKind::ConnectionRefused.into());
        assert!(!out_of_descriptors(&refused));
        assert_eq!(crate::exit::for_error(&refused), crate::exit::UNAVAILABLE);
    }
}
