//! Whether the reader of standard output went away, asked without writing.
//!
//! A watch (`lock holders --watch`, `leader show --watch`) writes only
//! when something changes, so a write's EPIPE would tell it that its
//! reader left (`| head -n 2`) only at the next change: while the locks
//! are quiet it would wait for ever, holding its session. An empty write
//! reports nothing (the kernel does not look at the pipe for 0 bytes), but
//! `poll` does: on Linux the writing end of a pipe whose readers are all
//! gone is `POLLERR`, a socket whose peer closed it and a terminal that
//! hung up are `POLLHUP`. A file or `/dev/null` is never either.

use std::os::fd::AsFd;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Whether standard output is a pipe, socket or terminal nobody reads any
/// more (no wait: the answer as of now).
pub fn stdout_reader_gone() -> bool {
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_without_readers_is_pollerr_and_one_with_a_reader_is_not() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let writable = |fd: &std::os::fd::OwnedFd| {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
            poll(&mut fds, PollTimeout::ZERO).unwrap();
            fds[0].revents().unwrap()
        };
        assert!(!writable(&write).intersects(PollFlags::POLLERR | PollFlags::POLLHUP));
        drop(read);
        assert!(writable(&write).contains(PollFlags::POLLERR));
    }
}
