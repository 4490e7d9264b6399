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

/// Snapshots on the cluster: a rerun after changes, a node stopped, then both
/// snapshots read back as they were, and a prune.
#[test]
fn three_nodes_snapshots_read_back_with_a_node_stopped_and_prune_compacts() {
    let Some(mut g) = Garage::cluster(3) else {
        return;
    };
    let sc = scratch();
    mkdirs(&sc.src.join("m"));
    for i in 0..12 {
        write(&sc.src.join(format!("m/f{i}")), &pattern(i, 1 << 20));
    }
    stamp_times(&sc.src);
    let url = g.url("cluster-snap");
    let utf8 = |p: &std::path::Path| p.to_str().expect("UTF-8").to_string();
    g.ferry(&["copy", &utf8(&sc.src), &url, "--shard-size", "6M"])
        .assert_ok();
    let then = sc.tmp.path().join("then");
    copy_tree(&sc.src, &then);
    // Most of the first shard changes: the prune below compacts it.
    for i in 0..5 {
        write(
            &sc.src.join(format!("m/f{i}")),
            format!("changed {i}").as_bytes(),
        );
    }
    std::fs::remove_file(sc.src.join("m/f7")).expect("remove");
    g.ferry(&["copy", &utf8(&sc.src), &url, "--shard-size", "6M"])
        .assert_ok();
    let listed = g.ferry(&["ls", "--snapshots", &url]);
    listed.assert_ok();
    let names: Vec<&str> = listed
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.len(), 2, "{listed}");
    g.nodes[2].kill();
    let no_atime = crate::common::compare::Options {
        skip_atime: true,
        ..Default::default()
    };
    g.ferry(&["copy", &url, &utf8(&sc.dst)]).assert_ok();
    crate::common::compare::assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", &format!("{url}@{}", names[0]), &utf8(&back)])
        .assert_ok();
    crate::common::compare::assert_same_tree_with(&then, &back, &no_atime);
    let pruned = g.ferry(&["prune", "--keep", "1", "--shard-size", "6M", &url]);
    pruned.assert_ok();
    assert!(
        pruned.stderr.contains("sparse shards compacted"),
        "{pruned}"
    );
    let again = sc.tmp.path().join("again");
    g.ferry(&["copy", &url, &utf8(&again)]).assert_ok();
    crate::common::compare::assert_same_tree_with(&sc.src, &again, &no_atime);
}

/// `cp -a src dst`.
fn copy_tree(src: &std::path::Path, dst: &std::path::Path) {
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .expect("cp");
    assert!(ok.success());
}
