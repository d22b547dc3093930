//! The verdict of `verify`: what the two test sessions saw
//! ([`Observations`]) and the first [`VerifyProblem`] it shows, if any.

use super::VerifyProblem;

/// What the two test sessions saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Observations {
    /// A: `pg_try_advisory_lock(k)` on a fresh key.
    pub(crate) a_took: bool,
    /// A: backend pid of that statement.
    pub(crate) a_pid_first: i32,
    /// A: backend pid of the next statement.
    pub(crate) a_pid_second: i32,
    /// A: whether that next statement found A's lock in `pg_locks`.
    pub(crate) a_lock_visible: bool,
    /// A: backend pid of its unlock (of its first statement if it took
    /// nothing).
    pub(crate) a_pid_unlock: i32,
    /// B: backend pid of its try while A holds the key.
    pub(crate) b_pid: i32,
    /// B: `pg_try_advisory_lock(k)` while A holds it.
    pub(crate) b_took_while_held: bool,
    /// B: backend pid of its try after A's unlock.
    pub(crate) b_pid_after: i32,
    /// B: `pg_try_advisory_lock(k)` after A's unlock.
    pub(crate) b_took_after_release: bool,
}

/// The verdict on what the sessions saw; the first problem found wins.
pub(crate) fn judge(o: &Observations) -> std::result::Result<(), VerifyProblem> {
    if !o.a_took {
        return Err(VerifyProblem::TestLockRefused);
    }
    if o.a_pid_first != o.a_pid_second {
        return Err(VerifyProblem::SessionNotKept {
            first: o.a_pid_first,
            second: o.a_pid_second,
        });
    }
    if o.a_pid_unlock != o.a_pid_first {
        return Err(VerifyProblem::SessionNotKept {
            first: o.a_pid_first,
            second: o.a_pid_unlock,
        });
    }
    if o.b_pid == o.a_pid_first {
        return Err(VerifyProblem::SharedBackend { pid: o.b_pid });
    }
    if o.b_pid_after != o.b_pid {
        return Err(VerifyProblem::SessionNotKept {
            first: o.b_pid,
            second: o.b_pid_after,
        });
    }
    if !o.a_lock_visible {
        return Err(VerifyProblem::LockNotRecorded);
    }
    if o.b_took_while_held {
        return Err(VerifyProblem::NoConflict);
    }
    if !o.b_took_after_release {
        return Err(VerifyProblem::NotReleased);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Observations {
        Observations {
            a_took: true,
            a_pid_first: 10,
            a_pid_second: 10,
            a_lock_visible: true,
            a_pid_unlock: 10,
            b_pid: 11,
            b_took_while_held: false,
            b_pid_after: 11,
            b_took_after_release: true,
        }
    }

    #[test]
    fn a_real_postgres_passes() {
        assert_eq!(judge(&healthy()), Ok(()));
    }

    #[test]
    fn transaction_pooler_that_moves_a_connection_is_caught() {
        let o = Observations {
            a_pid_second: 12,
            // Behind a pooler the lock may or may not be seen: either way
            // the moving session is the diagnosis.
            a_lock_visible: false,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(
            err,
            VerifyProblem::SessionNotKept {
                first: 10,
                second: 12
            }
        );
        assert!(err.to_string().contains("pool_mode = transaction"), "{err}");
    }

    #[test]
    fn pooler_that_shares_one_backend_is_caught() {
        // Re-entrancy makes B "get" the lock too: its try ran on A's backend.
        let o = Observations {
            b_pid: 10,
            b_took_while_held: true,
            b_pid_after: 10,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(err, VerifyProblem::SharedBackend { pid: 10 });
        assert!(err.to_string().contains("same server session"), "{err}");
    }

    #[test]
    fn an_unlock_or_a_later_try_on_another_backend_is_a_moved_session() {
        // A's unlock ran elsewhere, so its lock stayed where it was taken.
        let o = Observations {
            a_pid_unlock: 12,
            b_took_after_release: false,
            ..healthy()
        };
        let err = VerifyProblem::SessionNotKept {
            first: 10,
            second: 12,
        };
        assert_eq!(judge(&o), Err(err));
        // B's second try ran on another backend than its first.
        let o = Observations {
            b_pid_after: 10,
            ..healthy()
        };
        let err = VerifyProblem::SessionNotKept {
            first: 11,
            second: 10,
        };
        assert_eq!(judge(&o), Err(err));
    }

    #[test]
    fn no_op_advisory_functions_are_caught() {
        // CockroachDB: true for everyone, nothing in pg_locks.
        let o = Observations {
            a_lock_visible: false,
            b_took_while_held: true,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(err, VerifyProblem::LockNotRecorded);
        assert!(err.to_string().contains("do nothing"), "{err}");
        // Recorded but not excluding (an engine that fakes pg_locks).
        let o = Observations {
            b_took_while_held: true,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::NoConflict));
    }

    #[test]
    fn refused_test_lock_and_stuck_release_are_caught() {
        let o = Observations {
            a_took: false,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::TestLockRefused));
        let o = Observations {
            b_took_after_release: false,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::NotReleased));
    }
}
