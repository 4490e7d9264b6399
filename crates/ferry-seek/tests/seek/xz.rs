//! xz
