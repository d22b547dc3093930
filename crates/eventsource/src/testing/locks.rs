//! The lock conformance suite (filled in next).
