//! How a parallel unpack hands members to its workers, for any source of members: an
//! archive file walked through its index ([`super::unpack`]) or a tar read as a stream
//! ([`super::stream`]).
//!
//! One thread goes through the members in archive order. [`Router`] tells it, by the
//! order rules of [`OrderGuard`], where each goes: into a run of members of one directory
//! for the workers, which place runs in any order; aside, for a hardlink, until the
//! members before it are placed; or, from the first member whose outcome depends on an
//! earlier one's on, to the walking thread itself, which then waits for the workers
//! and places the rest in archive order. [`Handout`] and [`Queue`] carry the runs, and
//! count those not yet placed, so the walk can wait until all are.

use super::order::{Clash, OrderGuard};
use ferry_core::entry::{Entry, EntryKind, RelPath};
use std::sync::{mpsc, Condvar, Mutex, PoisonError};

/// Members handed to a worker at a time.
pub(super) const GROUP: usize = 128;

/// A run of members handed to a worker.
pub(super) trait Batch: Default {
    /// Whether it holds no member.
    fn is_empty(&self) -> bool;
}

/// How many runs handed to the workers are not yet placed, so the walk can wait until
/// all are.
#[derive(Default)]
pub(super) struct InFlight {
    runs: Mutex<usize>,
    all_placed: Condvar,
}

impl InFlight {
    fn add(&self) {
        *self.runs.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    /// One run handed out is placed (or dropped).
    pub(super) fn done(&self) {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        *runs = runs.saturating_sub(1);
        if *runs == 0 {
            self.all_placed.notify_all();
        }
    }

    /// Waits until every run handed out is placed.
    pub(super) fn wait_all_placed(&self) {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        drop(
            self.all_placed
                .wait_while(runs, |runs| *runs > 0)
                .unwrap_or_else(PoisonError::into_inner),
        );
    }
}

/// Where the walk hands runs of members to the workers.
pub(super) struct Handout<'a, G> {
    groups: mpsc::SyncSender<G>,
    pub(super) in_flight: &'a InFlight,
}

/// Where the workers take the runs from.
pub(super) struct Queue<G> {
    groups: Mutex<mpsc::Receiver<G>>,
}

/// A handout and its queue for `workers` workers, counting runs in `in_flight`. Bounded,
/// so the runs waiting for a worker take little memory however many members there are.
pub(super) fn channel<G>(workers: usize, in_flight: &InFlight) -> (Handout<'_, G>, Queue<G>) {
    let (groups, queue) = mpsc::sync_channel(4 * workers);
    let queue = Queue {
        groups: Mutex::new(queue),
    };
    (Handout { groups, in_flight }, queue)
}

impl<G: Batch> Handout<'_, G> {
    /// Hands `group` (if not empty) to a worker, leaving it empty.
    pub(super) fn send(&self, group: &mut G) {
        if group.is_empty() {
            return;
        }
        self.in_flight.add();
        // Workers take runs until the walk ends (dropping them after a failure), so
        // this waits at most for a free slot; it fails only without workers.
        if self.groups.send(std::mem::take(group)).is_err() {
            self.in_flight.done();
        }
    }
}

impl<G> Queue<G> {
    /// The next run, or None once the walk has ended (its handout dropped) and every
    /// run is taken. A worker takes runs until then, and tells [`InFlight::done`] of
    /// each.
    pub(super) fn next(&self) -> Option<G> {
        self.groups.lock().ok().and_then(|q| q.recv().ok())
    }
}

/// Where a member goes, as [`Router::route`] tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// To the workers, in the run being gathered; `new_run`: a run starts with it (its
    /// directory is not the last member's, or the run is full), so the one gathered so
    /// far goes out first.
    Workers { new_run: bool },
    /// A hardlink, kept aside until the members before it are placed.
    Aside,
    /// Placed by the walk, in archive order. `first`: the first such member: before it,
    /// the walk waits until the workers have placed every run handed out, then places
    /// the hardlinks kept aside.
    InOrder { first: bool },
}

/// The order rules of a parallel unpack (see the module's doc).
pub(super) struct Router {
    guard: OrderGuard,
    in_order: bool,
    last_parent: Option<RelPath>,
}

impl Router {
    /// A router with room for `members` paths made at once (see
    /// [`OrderGuard::with_room_for`]).
    pub(super) fn with_room_for(members: u64) -> Self {
        Router {
            guard: OrderGuard::with_room_for(members),
            in_order: false,
            last_parent: None,
        }
    }

    /// Whether a hardlink `entry` links to a name no earlier member gave: a sequential
    /// extraction links it to whatever stands there when it comes (nothing, or a file
    /// left from before), not to a later member of that name, so it must come in order.
    /// False for any other entry.
    pub(super) fn links_ahead(&self, entry: &Entry) -> bool {
        match &entry.kind {
            EntryKind::HardLink { target } => !self.guard.holds(target.as_bytes()),
            _ => false,
        }
    }

    /// Records `entry`, the next member in archive order (`run_len` members are in the
    /// run gathered so far), and tells where it goes and how it clashes with the
    /// members before it. `depends`: its outcome depends on an earlier member's in a
    /// way the guard does not see (see [`Router::links_ahead`]).
    pub(super) fn route(&mut self, entry: &Entry, run_len: usize, depends: bool) -> (Route, Clash) {
        let clash = self.guard.clashes(&entry.path, &entry.kind);
        if self.in_order {
            return (Route::InOrder { first: false }, clash);
        }
        if clash.any() || depends {
            self.in_order = true;
            return (Route::InOrder { first: true }, clash);
        }
        if let EntryKind::HardLink { .. } = entry.kind {
            return (Route::Aside, clash);
        }
        let parent = entry.path.parent();
        let new_run = self.last_parent.as_ref() != Some(&parent) || run_len >= GROUP;
        if new_run {
            self.last_parent = Some(parent);
        }
        (Route::Workers { new_run }, clash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: EntryKind) -> Entry {
        Entry {
            path: RelPath::from_bytes(path.as_bytes().to_vec()),
            kind,
            meta: Default::default(),
            links: None,
        }
    }

    fn file(path: &str) -> Entry {
        entry(path, EntryKind::File { size: 1 })
    }

    fn link(path: &str, target: &str) -> Entry {
        let target = RelPath::from_bytes(target.as_bytes().to_vec());
        entry(path, EntryKind::HardLink { target })
    }

    /// Runs by directory, links aside, then in order from the first member given
    /// again, and for every member after it.
    #[test]
    fn members_go_to_runs_aside_then_in_order() {
        let mut r = Router::with_room_for(0);
        let mut route = |e: &Entry, len| {
            let depends = r.links_ahead(e);
            r.route(e, len, depends).0
        };
        assert_eq!(route(&file("a/f"), 0), Route::Workers { new_run: true });
        assert_eq!(route(&file("a/g"), 1), Route::Workers { new_run: false });
        assert_eq!(route(&file("a/h"), GROUP), Route::Workers { new_run: true });
        assert_eq!(route(&link("b/l", "a/f"), 0), Route::Aside);
        assert_eq!(route(&file("b/f"), 1), Route::Workers { new_run: true });
        assert_eq!(route(&file("a/g"), 1), Route::InOrder { first: true });
        assert_eq!(route(&file("c/f"), 0), Route::InOrder { first: false });
    }

    /// A hardlink to a name no member gave before it comes in order.
    #[test]
    fn a_link_to_a_later_member_comes_in_order() {
        let mut r = Router::with_room_for(0);
        let l = link("l", "later");
        assert!(r.links_ahead(&l));
        assert_eq!(r.route(&l, 0, true).0, Route::InOrder { first: true });
    }
}
