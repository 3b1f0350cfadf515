//! The importer's registry: every family file's parsers (`PARSERS`: the ONNX op types each parser maps) and
//! its `SUPPORTED` table for `bundlec ops`, gathered in one place; `lower_node` looks a node's op type up here.
//! A test checks that the two agree: every registered op type is documented and every documented one
//! registered.

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parse, Parser};
use super::{
    cnn_ops, core_ops, data_ops, einsum, nn_ops, quant_ops, resize_ops, scatter_ops, shape_ops,
    slice_ops,
};
use crate::error::{Error, Result};
use crate::ir::TensorId;
use tract_onnx::pb::NodeProto;

/// A family file's `SUPPORTED` table: op types and their constraints.
type Docs = &'static [(&'static str, &'static str)];

/// Every family file's parsers and its `SUPPORTED` table (in `bundlec ops` order).
const FAMILIES: &[(&[Parser], Docs)] = &[
    (core_ops::PARSERS, core_ops::SUPPORTED),
    (cnn_ops::PARSERS, cnn_ops::SUPPORTED),
    (shape_ops::PARSERS, shape_ops::SUPPORTED),
    (data_ops::PARSERS, data_ops::SUPPORTED),
    (slice_ops::PARSERS, slice_ops::SUPPORTED),
    (scatter_ops::PARSERS, scatter_ops::SUPPORTED),
    (einsum::PARSERS, einsum::SUPPORTED),
    (resize_ops::PARSERS, resize_ops::SUPPORTED),
    (nn_ops::PARSERS, nn_ops::SUPPORTED),
    (quant_ops::PARSERS, quant_ops::SUPPORTED),
];

/// Every registered parser.
fn parsers() -> impl Iterator<Item = &'static Parser> {
    FAMILIES.iter().flat_map(|(parsers, _)| parsers.iter())
}

/// Op types whose output shapes depend on the data (and control flow, whose may).
const DATA_DEPENDENT: &[&str] = &[
    "NonZero",
    "Unique",
    "NonMaxSuppression",
    "Compress",
    "If",
    "Loop",
    "Scan",
];

/// The parser registered for ONNX op type `op`.
pub(super) fn parser(op: &str) -> Option<Parse> {
    parsers()
        .find(|(ops, _)| ops.contains(&op))
        .map(|&(_, parse)| parse)
}

/// Every ONNX op type the importer maps, with its constraints, for `bundlec ops`.
pub fn supported_ops() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    FAMILIES.iter().flat_map(|(_, docs)| docs.iter())
}

/// The domains whose ops are mapped: the default one, and three contrib int8 ops.
fn domain_ok(node: &NodeProto) -> bool {
    let contrib = node.domain == "com.microsoft"
        && matches!(
            node.op_type.as_str(),
            "QLinearAdd" | "QLinearMul" | "QLinearGlobalAveragePool"
        );
    node.domain.is_empty() || node.domain == "ai.onnx" || contrib
}

impl Importer<'_> {
    /// Maps one node through the parser registered for its op type. `ins` are the node's inputs (None for an
    /// omitted optional input).
    pub(super) fn lower_node(
        &mut self,
        node: &NodeProto,
        name: &str,
        ins: &[Option<TensorId>],
    ) -> Result<Lowered> {
        let op = node.op_type.as_str();
        if !domain_ok(node) {
            return Err(Error::unsupported(
                name,
                op,
                format!("domain '{}' is not supported", node.domain),
            ));
        }
        let parse = parser(op).ok_or_else(|| {
            let why = if DATA_DEPENDENT.contains(&op) {
                "its output shape depends on the input data, which a bundle cannot have: compile the part \
                 before it with --outputs NAME,... (the tensors it reads) and run the rest on the host"
            } else {
                "op is not supported"
            };
            Error::unsupported(name, op, why)
        })?;
        let a = Attrs::new(node, name, self.warnings.clone());
        let n = Node {
            node,
            name,
            op,
            ins,
            a: &a,
        };
        parse(self, &n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The op types of a `SUPPORTED` row (`"Add, Sub"`, `"X (com.microsoft)"`, line continuations).
    fn documented() -> Vec<String> {
        supported_ops()
            .flat_map(|(ops, _)| ops.split(','))
            .map(|o| o.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn every_registered_op_is_documented_and_every_documented_op_registered() {
        let docs = documented();
        let registered: Vec<&str> = parsers().flat_map(|(ops, _)| ops.iter().copied()).collect();
        for op in &registered {
            assert!(
                docs.iter().any(|d| d == op),
                "{op} is registered but not in SUPPORTED"
            );
            let n = registered.iter().filter(|r| *r == op).count();
            assert_eq!(n, 1, "{op} is registered {n} times");
        }
        for d in &docs {
            assert!(parser(d).is_some(), "{d} is in SUPPORTED but has no parser");
        }
    }
}
