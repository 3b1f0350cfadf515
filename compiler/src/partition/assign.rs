//! Grouping accepted nodes into maximal convex subgraphs. Nodes are visited in topological order; for each node
//! `u`, `reach[u]` holds the groups from which `u` can be reached by a path that has left the group. `u` may join
//! the group of one of its accepted producers only if that group is not in the union of its producers' `reach`
//! (joining would let a path leave the group and re-enter it); without such a group it joins the latest group
//! that has no path to it at all, else starts a new one. `is_convex` checks any assignment the same way,
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
            // A producer's group first; else the latest group with no path to `u` at all (a sibling branch:
            // `u` has no producer in it and no path that left it reaches `u`, and no later node can lie
            // between them), so parallel branches such as Q/K/V projections share one dispatch.
            let pick = ps
                .iter()
                .filter_map(|p| group.get(p).copied())
                .chain((0..groups.len()).rev())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinOp, DType, NodeData, Op, TensorKind, UnOp};

    /// A graph of same-shaped tensors: each node is (op, input node indices or -1 for the model input).
    fn dag(nodes: &[(Op, Vec<i64>)]) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", DType::F32, vec![1, 4], TensorKind::Input);
        g.inputs.push(x);
        let mut outs = Vec::new();
        for (i, (op, ins)) in nodes.iter().enumerate() {
            let y = g.add_tensor(format!("t{i}"), DType::F32, vec![1, 4], TensorKind::Value);
            let inputs = ins
                .iter()
                .map(|&j| if j < 0 { x } else { outs[j as usize] })
                .collect();
            g.push_node(NodeData {
                name: format!("n{i}"),
                onnx_op: "Op".into(),
                op: op.clone(),
                inputs,
                outputs: vec![y],
            });
            outs.push(y);
        }
        g.outputs.push(*outs.last().unwrap());
        g
    }
    const NPU: Op = Op::Unary(UnOp::Relu);
    const CPU: Op = Op::Unary(UnOp::Sigmoid);
    fn add() -> Op {
        Op::Binary(BinOp::Add)
    }
    fn accept(g: &Graph) -> impl Fn(NodeId) -> bool + '_ {
        |n| {
            matches!(
                g.nodes[n].op,
                Op::Unary(UnOp::Relu) | Op::Binary(BinOp::Add)
            )
        }
    }
    fn names(g: &Graph, groups: &[Vec<NodeId>]) -> Vec<Vec<String>> {
        groups
            .iter()
            .map(|v| v.iter().map(|&n| g.nodes[n].name.clone()).collect())
            .collect()
    }

    #[test]
    fn diamond_through_the_cpu_is_split() {
        // n0 (npu) -> n1 (cpu) -> n3 (npu); n0 -> n2 (npu) -> n3: n3 may not join n0's group.
        let g = dag(&[
            (NPU, vec![-1]),
            (CPU, vec![0]),
            (NPU, vec![0]),
            (add(), vec![1, 2]),
        ]);
        let groups = group_convex(&g, &accept(&g));
        assert_eq!(names(&g, &groups), vec![vec!["n0", "n2"], vec!["n3"]]);
        assert!(is_convex(&g, &groups).is_ok());
        // The merged assignment is rejected by the checker.
        let bad = vec![vec![groups[0][0], groups[0][1], groups[1][0]]];
        assert!(is_convex(&g, &bad).unwrap_err().contains("n3"));
    }

    #[test]
    fn diamond_inside_the_npu_stays_whole() {
        let g = dag(&[
            (NPU, vec![-1]),
            (NPU, vec![0]),
            (NPU, vec![0]),
            (add(), vec![1, 2]),
            (CPU, vec![3]),
        ]);
        let groups = group_convex(&g, &accept(&g));
        assert_eq!(names(&g, &groups), vec![vec!["n0", "n1", "n2", "n3"]]);
    }

    #[test]
    fn long_detour_and_nested_diamonds() {
        // n0 -> n1(cpu) -> n2(npu) -> n3(cpu) -> n5; n0 -> n4(npu) -> n5(add): n5 reaches n0's group via a detour.
        let g = dag(&[
            (NPU, vec![-1]),
            (CPU, vec![0]),
            (NPU, vec![1]),
            (CPU, vec![2]),
            (NPU, vec![0]),
            (add(), vec![3, 4]),
            (add(), vec![5, 2]),
        ]);
        let groups = group_convex(&g, &accept(&g));
        assert!(is_convex(&g, &groups).is_ok(), "{:?}", names(&g, &groups));
        let of = |name: &str| {
            groups
                .iter()
                .position(|v| v.iter().any(|&n| g.nodes[n].name == name))
                .unwrap()
        };
        assert_eq!(of("n0"), of("n4"));
        assert_ne!(of("n5"), of("n0"));
        assert_ne!(of("n6"), of("n2"));
    }

    #[test]
    fn random_dags_always_give_convex_groups() {
        let mut s: u64 = 0x1234_5678;
        let mut next = |m: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s % m
        };
        for _ in 0..300 {
            let n = 3 + next(25) as usize;
            let nodes: Vec<(Op, Vec<i64>)> = (0..n)
                .map(|i| {
                    let a = next(i as u64 + 1) as i64 - 1;
                    let b = next(i as u64 + 1) as i64 - 1;
                    let op = match next(3) {
                        0 => CPU,
                        1 => NPU,
                        _ => add(),
                    };
                    match op {
                        Op::Binary(_) => (op, vec![a, b]),
                        _ => (op, vec![a]),
                    }
                })
                .collect();
            let g = dag(&nodes);
            let groups = group_convex(&g, &accept(&g));
            is_convex(&g, &groups).unwrap();
            let placed: usize = groups.iter().map(Vec::len).sum();
            assert_eq!(placed, g.order.iter().filter(|&&x| accept(&g)(x)).count());
        }
    }
}
