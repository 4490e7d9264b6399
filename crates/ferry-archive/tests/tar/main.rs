//! Integration tests of the strict tar reader: archives made by GNU tar and bsdtar in
//! every format, hand-made hostile archives, the fuzz corpus and a mutation loop.

mod check;
mod common;
mod corpus;
mod craft;
#[path = "../../fuzz/exercise.rs"]
mod exercise;
#[path = "../../fuzz/exercise_index.rs"]
mod exercise_index;
mod hostile;
mod index_corpus;
mod liberal;
mod real;
mod tree;
