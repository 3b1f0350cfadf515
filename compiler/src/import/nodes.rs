//! What the family files' parsers take and give: the node being mapped (`Node`), what it becomes (`Lowered`),
//! the parser type and its registry entry (`Parser`; `registry.rs` holds the registry), and the error for a
//! missing input.

use super::attrs::Attrs;
use super::importer::Importer;
use crate::error::{Error, Result};
use crate::ir::{BinOp, Op, Tensor, TensorId};
use tract_onnx::pb::NodeProto;

/// What an ONNX node becomes.
pub enum Lowered {
    /// One IR node: the op and its inputs.
    Node(Op, Vec<TensorId>),
    /// A chain of binary ops folded left over the inputs (variadic Max/Min/Sum).
    Chain(BinOp, Vec<TensorId>),
    /// The node's output is another tensor (Identity, inference Dropout).
    Alias(TensorId),
    /// The node's output is a compile-time constant.
    Const(Tensor),
    /// One IR node per ONNX output, in order (Split).
    Many(Vec<(Op, Vec<TensorId>)>),
}

/// Input `i` of a node (`ins`: None for an omitted optional input), or the error naming the node that lacks it.
pub(super) fn required(
    ins: &[Option<TensorId>],
    name: &str,
    op: &str,
    i: usize,
) -> Result<TensorId> {
    ins.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| Error::node(name, op, format!("missing input {i}")))
}

/// One node being mapped: its proto, display name, op type, inputs (None for an omitted optional input) and
/// attributes.
#[derive(Clone, Copy)]
pub(super) struct Node<'n> {
    /// The ONNX node.
    pub(super) node: &'n NodeProto,
    /// Its display name (the node's name, else its first output's).
    pub(super) name: &'n str,
    /// Its op type.
    pub(super) op: &'n str,
    /// Its inputs.
    pub(super) ins: &'n [Option<TensorId>],
    /// Its attributes.
    pub(super) a: &'n Attrs<'n>,
}

/// Maps one node of an op type the parser is registered for.
pub(super) type Parse = fn(&mut Importer<'_>, &Node<'_>) -> Result<Lowered>;

/// A registry entry: the ONNX op types one parser maps, and the parser.
pub(super) type Parser = (&'static [&'static str], Parse);

impl Node<'_> {
    /// Input `i`, or the error naming the node that lacks it.
    pub(super) fn req(&self, i: usize) -> Result<TensorId> {
        required(self.ins, self.name, self.op, i)
    }
    /// Input `i`, None when omitted.
    pub(super) fn input(&self, i: usize) -> Option<TensorId> {
        self.ins.get(i).copied().flatten()
    }
}

/// The error for an index argument that is not a compile-time constant; names the ONNX input tensor(s).
pub(super) fn err_const(node: &NodeProto, name: &str, idx: &[usize], what: &str) -> Error {
    let names: Vec<String> = idx
        .iter()
        .filter_map(|&i| node.input.get(i).filter(|n| !n.is_empty()))
        .map(|n| format!("'{n}'"))
        .collect();
    Error::unsupported(
        name,
        &node.op_type,
        format!("input {} ({what}) must be constant", names.join(", ")),
    )
}

impl Importer<'_> {
    /// The integer constant at input `i` of `n` (None when the input is omitted), or the error naming it as
    /// `what` when it is not a constant.
    pub(super) fn const_input(
        &self,
        n: &Node<'_>,
        i: usize,
        what: &str,
    ) -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => self
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(n.node, n.name, &[i], what)),
        }
    }
}

impl Importer<'_> {
    /// Appends (or folds, when its inputs are constants) one op of the decomposition of node `n`: named
    /// `NODE.tag`, its output `OUTPUT.tag`.
    pub(super) fn sub_node(
        &mut self,
        n: &Node<'_>,
        tag: &str,
        op: Op,
        inputs: Vec<TensorId>,
    ) -> Result<TensorId> {
        let out0 = n.node.output.first().map_or("", String::as_str);
        self.add_node(
            &format!("{}.{tag}", n.name),
            n.op,
            op,
            inputs,
            &format!("{out0}.{tag}"),
        )
    }
}
