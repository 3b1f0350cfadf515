//! Typed access to a node's ONNX attributes with errors that name the node, op and attribute.

/// Largest kernel side, stride, dilation or pad accepted from a model (a hostile value must not size buffers).
pub const MAX_WINDOW: usize = 1 << 16;
use crate::error::{Error, Result};
use tract_onnx::pb::{AttributeProto, NodeProto};

/// A node's attributes with its name and op type for error messages.
pub struct Attrs<'a> {
    node: &'a NodeProto,
    /// The node's display name.
    pub name: &'a str,
}

impl<'a> Attrs<'a> {
    /// Wraps a node.
    pub fn new(node: &'a NodeProto, name: &'a str) -> Self {
        Attrs { node, name }
    }
    fn get(&self, key: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == key)
    }
    pub(crate) fn err(&self, key: &str, msg: impl std::fmt::Display) -> Error {
        Error::node(
            self.name,
            &self.node.op_type,
            format!("attribute '{key}': {msg}"),
        )
    }
    /// Whether the attribute is present.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    /// An int attribute or a default.
    pub fn int(&self, key: &str, default: i64) -> i64 {
        self.get(key).map_or(default, |a| a.i)
    }
    /// A float attribute or a default.
    pub fn float(&self, key: &str, default: f32) -> f32 {
        self.get(key).map_or(default, |a| a.f)
    }
    /// An ints attribute, if present.
    pub fn ints(&self, key: &str) -> Option<&'a [i64]> {
        self.get(key).map(|a| a.ints.as_slice())
    }
    /// A string attribute or a default.
    pub fn string(&self, key: &str, default: &str) -> Result<String> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s.clone()).map_err(|_| self.err(key, "not UTF-8")),
        }
    }
    /// An ints attribute of exactly `n` non-negative values, or `default`.
    pub fn usizes(&self, key: &str, n: usize, default: usize) -> Result<Vec<usize>> {
        match self.ints(key) {
            None => Ok(vec![default; n]),
            Some(v) if v.len() == n && v.iter().all(|&x| (0..=MAX_WINDOW as i64).contains(&x)) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(self.err(
                key,
                format!("expected {n} values in 0..={MAX_WINDOW}, got {v:?}"),
            )),
        }
    }
    /// Like `usizes`, but every value must be in `1..=MAX_WINDOW` (kernel sizes, strides, dilations).
    pub fn positive_usizes(&self, key: &str, n: usize, default: usize) -> Result<Vec<usize>> {
        let v = self.usizes(key, n, default)?;
        if self.has(key) && v.iter().any(|&x| x == 0 || x > MAX_WINDOW) {
            return Err(self.err(
                key,
                format!("expected {n} values in 1..={MAX_WINDOW}, got {v:?}"),
            ));
        }
        Ok(v)
    }
    /// A tensor attribute.
    pub fn tensor(&self, key: &str) -> Option<&'a tract_onnx::pb::TensorProto> {
        self.get(key).and_then(|a| a.t.as_ref())
    }
    /// Floats attribute.
    pub fn floats(&self, key: &str) -> Option<&'a [f32]> {
        self.get(key).map(|a| a.floats.as_slice())
    }
    /// Resolves a possibly negative axis against `rank`.
    pub fn axis(&self, key: &str, default: i64, rank: usize) -> Result<usize> {
        let a = self.int(key, default);
        let r = rank as i64;
        if a < -r || a >= r.max(1) {
            return Err(self.err(key, format!("axis {a} out of range for rank {rank}")));
        }
        Ok(if a < 0 { (a + r) as usize } else { a as usize })
    }
}
