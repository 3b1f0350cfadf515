//! Grouping accepted nodes into maximal convex subgraphs. Nodes are visited in topological order; for each node
//! `u`, `reach[u]` holds the groups from which `u` can be reached by a path that has left the group. `u` may join
//! the group of one of its accepted producers only if that group is not in the union of its producers' `reach`
//! (joining would let a path leave the group and re-enter it). `is_convex` checks any assignment the same way,
//! which is how a partition cache read back from disk is re-validated.

use crate::ir::{Graph, NodeId};
use std::collections::{BTreeSet, HashMap};

fn preds(g: &Graph) -> HashMap<NodeId, Vec<NodeId>> {
    let prod = g.producers();
    g.order
        .iter()
        .map(|&n| {
            let mut v: Vec<NodeId> = g.nodes[n].inputs.iter().filter_map(|&t| prod[t]).collect();
            v.sort();
            v.dedup();
            (n, v)
        })
        .collect()
}

/// Groups `accepted` nodes; groups are returned in topological order of their first node, each in topological
/// order.
pub fn group_convex(g: &Graph, accepted: &dyn Fn(NodeId) -> bool) -> Vec<Vec<NodeId>> {
    let preds = preds(g);
    let mut group: HashMap<NodeId, usize> = HashMap::new();
    let mut reach: HashMap<NodeId, BTreeSet<usize>> = HashMap::new();
    let mut groups: Vec<Vec<NodeId>> = Vec::new();
    for &u in &g.order {
        let ps = &preds[&u];
        let mut before: BTreeSet<usize> = BTreeSet::new();
        for p in ps {
            before.extend(reach[p].iter().copied());
        }
        let mine = if accepted(u) {
            let pick = ps
                .iter()
                .filter_map(|p| group.get(p).copied())
                .find(|gi| !before.contains(gi));
            let gi = pick.unwrap_or_else(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[gi].push(u);
            group.insert(u, gi);
            Some(gi)
        } else {
            None
        };
        let mut r = before;
        for p in ps {
            if let Some(&gp) = group.get(p) {
                if Some(gp) != mine {
                    r.insert(gp);
                }
            }
        }
        reach.insert(u, r);
    }
    groups
}

/// Checks that no path leaves a group and re-enters it; the error names a node that would re-enter.
pub fn is_convex(g: &Graph, groups: &[Vec<NodeId>]) -> Result<(), String> {
    let preds = preds(g);
    let group: HashMap<NodeId, usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(i, v)| v.iter().map(move |&n| (n, i)))
        .collect();
    let mut reach: HashMap<NodeId, BTreeSet<usize>> = HashMap::new();
    for &u in &g.order {
        let mut r: BTreeSet<usize> = BTreeSet::new();
        for p in &preds[&u] {
            r.extend(reach[p].iter().copied());
        }
        if let Some(gi) = group.get(&u) {
            if r.contains(gi) {
                return Err(format!(
                    "node '{}' re-enters group {gi} after a path that left it",
                    g.nodes[u].name
                ));
            }
        }
        for p in &preds[&u] {
            if let Some(&gp) = group.get(p) {
                if group.get(&u) != Some(&gp) {
                    r.insert(gp);
                }
            }
        }
        reach.insert(u, r);
    }
    Ok(())
}
