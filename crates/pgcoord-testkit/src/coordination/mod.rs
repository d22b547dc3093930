//! The conformance suites of the coordination primitives
//! (`pgcoord::coordination`) and of [`DistributedLock::try_lock_any`].
//!
//! Every implementation of the lock ports must pass it, with the same
//! factory as [`lock_conformance_tests!`](crate::lock_conformance_tests):
//!
//! ```no_run
//! use pgcoord::InMemoryLockManager;
//!
//! pgcoord_testkit::coordination_conformance_tests!(|| async {
//!     let primary = InMemoryLockManager::new(Some("t".into()));
//!     let observer = primary.clone();
//!     (primary, observer, ())
//! });
//! ```
//!
//! `primary` runs the primitive under test; `observer` (a second manager
//! on the same lock space) checks from outside what is held, and competes.
//! As in the lock suite, each case fails with its name once it has run for
//! [`hang_guard::CASE_LIMIT`](crate::hang_guard::CASE_LIMIT).
//!
//! Elections have a macro of their own, [`election_conformance_tests!`](crate::election_conformance_tests):
//! they need fencing tokens (the terms), a view of who leads
//! ([`LeaderObserver`](pgcoord::coordination::LeaderObserver)), and a
//! way to end a leader's hold from outside ([`election::LeadershipBreaker`]),
//! which the factory returns third:
//!
//! ```no_run
//! use pgcoord::InMemoryLockManager;
//!
//! pgcoord_testkit::election_conformance_tests!(|| async {
//!     let primary = InMemoryLockManager::new(Some("t".into()));
//!     (primary.clone(), primary.clone(), primary)
//! });
//! ```
//!
//! [`DistributedLock::try_lock_any`]: pgcoord::DistributedLock::try_lock_any

pub mod election;
pub mod election_run;
pub mod multi;
pub mod semaphore;

/// Generates one `#[tokio::test]` per coordination case; see the module docs.
#[macro_export]
macro_rules! coordination_conformance_tests {
    ($make:expr) => {
        $crate::__coordination_cases!($make; multi:
            try_lock_any_takes_the_first_free_key,
            try_lock_any_is_none_when_all_are_held,
            try_lock_any_stops_at_a_too_long_key,
            cancel_try_lock_any_at_every_poll,
            acquire_many_takes_every_key_once_in_canonical_order,
            acquire_many_of_nothing_is_an_empty_guard,
            acquire_many_timeout_leaves_nothing_held,
            acquire_many_zero_timeout_makes_one_attempt,
            acquire_many_waits_holding_only_keys_below_the_missing_one,
            acquire_many_refuses_a_too_long_key_holding_nothing,
            overlapping_sets_finish_and_exclude,
            cancel_acquire_many_at_every_poll,
            cancel_contended_acquire_many_at_every_poll,
            cancel_multi_release_at_every_poll,
        );
        $crate::__coordination_cases!($make; semaphore:
            semaphore_grants_at_most_n_permits,
            semaphore_keys_follow_the_documented_derivation,
            semaphore_refuses_bad_counts,
            semaphore_timeout_names_the_semaphore_and_holds_nothing,
            semaphore_waiter_gets_a_released_permit,
            semaphore_waiters_are_served_one_per_release,
            semaphore_tasks_of_two_managers_never_exceed_n,
            semaphore_detects_a_participant_with_more_permits,
            semaphore_does_not_take_a_passing_probe_for_a_larger_participant,
            cancel_semaphore_try_acquire_at_every_poll,
            cancel_semaphore_acquire_at_every_poll,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __coordination_cases {
    ($make:expr; $module:ident: $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, _keep) = ($make)().await;
                let case = $crate::coordination::$module::$case(&primary, &observer);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
}

/// Generates one `#[tokio::test]` per election case; see the module docs.
#[macro_export]
macro_rules! election_conformance_tests {
    ($make:expr) => {
        $crate::__election_cases!($make;
            election_campaign_times_out_while_another_leads,
            election_campaign_succeeds_after_resign,
            election_terms_strictly_increase_across_leaders,
            election_one_leader_at_a_time_among_candidates,
            election_observe_reports_the_leader_and_vacancies,
            election_cancel_campaign_at_every_poll,
            election_cancel_try_campaign_at_every_poll,
        );
        $crate::__election_cases!($make; with_breaker:
            election_lost_leadership_signals_and_hands_over,
        );
        $crate::__election_cases!($make; run:
            election_run_while_leading_runs_each_term_and_stops,
            election_run_while_leading_stops_while_campaigning,
            election_cancel_run_while_leading_at_every_poll,
        );
        $crate::__election_cases!($make; run_with_breaker:
            election_run_while_leading_tells_the_work_of_a_loss,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __election_cases {
    ($make:expr; run: $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, _breaker) = ($make)().await;
                let case = $crate::coordination::election_run::$case(&primary, &observer);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
    ($make:expr; run_with_breaker: $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, breaker) = ($make)().await;
                let case = $crate::coordination::election_run::$case(&primary, &observer, &breaker);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
    ($make:expr; with_breaker: $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, breaker) = ($make)().await;
                let case = $crate::coordination::election::$case(&primary, &observer, &breaker);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
    ($make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, _breaker) = ($make)().await;
                let case = $crate::coordination::election::$case(&primary, &observer);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
}
