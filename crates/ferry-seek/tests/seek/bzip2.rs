//! bzip2
