//! The error kinds behind [`Error`](crate::Error), one home each.
//!
//! Every fallible call of the crate returns [`crate::Error`]; match on it,
//! or ask it with its methods ([`Error::is_timeout`](crate::Error::is_timeout),
//! [`Error::as_backend`](crate::Error::as_backend), ...). The types here are
//! what its variants carry.

pub use crate::ports::backend_error::{BackendError, BackendErrorKind};
pub use crate::ports::error::{
    AcquireFailure, LockAcquisitionError, LockLostError, LockNotHeldError,
};
pub use crate::ports::fenced::FencedError;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub use crate::ports::readmodels::{Cause, ReadModelError};
pub use crate::ports::sql_state::SqlState;
