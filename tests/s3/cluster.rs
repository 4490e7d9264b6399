//! A three-node Garage cluster on one machine (replication factor 3): an upload, then
//! one node stopped, then a download gives the whole tree.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::{scratch, trees};
use crate::garage::Garage;

#[test]
fn three_nodes_one_stopped_the_download_is_whole() {
    let Some(mut g) = Garage::cluster(3) else {
        return;
    };
    let sc = scratch();
    trees::mixed(&sc.src.join("mixed"));
    mkdirs(&sc.src.join("m"));
    for i in 0..12 {
        write(&sc.src.join(format!("m/f{i}")), &pattern(i, 1 << 20));
    }
    stamp_times(&sc.src);
    let url = g.url("cluster");
    let src = sc.src.to_str().expect("UTF-8");
    let dst = sc.dst.to_str().expect("UTF-8");
    g.ferry(&["copy", src, &url, "--shard-size", "6M"])
        .assert_ok();
    // Node 0 serves the S3 API; another one goes.
    g.nodes[2].kill();
    g.ferry(&["copy", &url, dst]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
}
