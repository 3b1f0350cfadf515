//! `fuse_transposes`: a Transpose whose input is another Transpose's output, read by nothing else, reads the
//! first one's input instead with the composed permutation, and the first leaves the order. An attention's
//! `Kᵀ` is written as a head split `[B, S, H, D] → [B, H, S, D]` followed by a swap of the last two dims; fused,
//! it is one `[B, S, H, D] → [B, H, D, S]` gather instead of a copy of K and a gather of the copy. Data
//! movement only: results are bitwise the same.

use crate::ir::{Graph, Op, Uses};

/// Fuses every Transpose pair; returns how many.
pub fn fuse_transposes(g: &mut Graph) -> usize {
    let mut removed = Vec::new();
    let mut uses = Uses::new(g);
    for &second in &g.order.clone() {
        let Op::Transpose(p2) = &g.nodes[second].op else {
            continue;
        };
        let mid = g.nodes[second].inputs[0];
        let Some(first) = uses.producer(mid) else {
            continue;
        };
        let Op::Transpose(p1) = &g.nodes[first].op else {
            continue;
        };
        if uses.single_use(mid) != Some(second) || p1.len() != p2.len() {
            continue;
        }
        // Output dim i of the second is dim p2[i] of the middle tensor, which is dim p1[p2[i]] of the input.
        let perm = p2
            .iter()
            .map(|&d| p1.get(d).copied())
            .collect::<Option<Vec<_>>>();
        let Some(perm) = perm else {
            continue;
        };
        g.nodes[second].op = Op::Transpose(perm);
        let src = g.nodes[first].inputs[0];
        uses.set_input(g, second, 0, src);
        uses.remove_node(g, first);
        removed.push(first);
    }
    g.remove_nodes(&removed);
    removed.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{eval, DType, NodeData, Tensor, TensorKind};

    fn transpose(
        g: &mut Graph,
        name: &str,
        x: crate::ir::TensorId,
        perm: Vec<usize>,
    ) -> crate::ir::TensorId {
        let shape: Vec<usize> = perm.iter().map(|&p| g.tensors[x].shape[p]).collect();
        let y = g.add_tensor(name, DType::F32, shape, TensorKind::Value);
        g.push_node(NodeData {
            name: name.into(),
            onnx_op: "Transpose".into(),
            op: Op::Transpose(perm),
            inputs: vec![x],
            outputs: vec![y],
        });
        y
    }

    /// An attention's K head split and swap become one transpose with the composed permutation, whose result
    /// is element for element the pair's; a middle tensor with a second reader is left alone.
    #[test]
    fn head_split_and_swap_compose() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", DType::F32, vec![2, 3, 4, 5], TensorKind::Input);
        g.inputs.push(x);
        let y = transpose(&mut g, "t1", x, vec![0, 2, 1, 3]);
        let z = transpose(&mut g, "t2", y, vec![0, 1, 3, 2]);
        g.outputs.push(z);
        let input = || {
            vec![Tensor::f32(
                vec![2, 3, 4, 5],
                (0..120).map(|i| i as f32).collect(),
            )]
        };
        let before = eval::run(&g, input(), &mut |_, _| {}).unwrap();
        assert_eq!(fuse_transposes(&mut g), 1);
        assert_eq!(g.order.len(), 1);
        assert_eq!(g.nodes[g.order[0]].op, Op::Transpose(vec![0, 2, 3, 1]));
        assert_eq!(before, eval::run(&g, input(), &mut |_, _| {}).unwrap());
        let mut g2 = Graph::default();
        let x = g2.add_tensor("x", DType::F32, vec![2, 3, 4, 5], TensorKind::Input);
        let y = transpose(&mut g2, "t1", x, vec![0, 2, 1, 3]);
        let z = transpose(&mut g2, "t2", y, vec![0, 1, 3, 2]);
        g2.outputs.extend([y, z]);
        assert_eq!(fuse_transposes(&mut g2), 0);
    }
}
