//! Times the check of a ferry archive's own tree table against its tar headers
//! (`ferry_archive::tree::check`), what `ferry mount` runs before serving file data:
//! `cargo run --release -p ferry-archive --example check_table -- ARCHIVE [ROUNDS]`.

use ferry_archive::read::archive::{embedded_tree, ReadAt, Source};
use ferry_archive::tree::{check_against_tar, Table, TableFile};
use std::fs::File;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: check_table ARCHIVE [ROUNDS]")?;
    let rounds: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    // Read as the plain archive it stands for where its index is packed.
    let source = Source::file(File::open(&path)?)?;
    let len = source.data_len()?;
    let tree = embedded_tree(&source, len)?.ok_or("no tree table in this archive")?;
    let source: std::sync::Arc<dyn ReadAt + Send + Sync> = std::sync::Arc::new(source);
    for round in 0..rounds {
        let start = Instant::now();
        let table: Table =
            Table::open(TableFile::Shared(source.clone()), tree.at, tree.len, false)?;
        let checked = check_against_tar(&table, &*source)?;
        println!(
            "round {round}: {} files, {} members read, {:.1} ms",
            checked.files,
            checked.members,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
