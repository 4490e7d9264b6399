//! zstd
