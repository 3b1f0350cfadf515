//! Typed access to a node's ONNX attributes with errors that name the node, op and attribute: the one place
//! attributes are read, where each value's declared type is checked against the type the op expects.

/// Largest kernel side, stride, dilation or pad accepted from a model (a hostile value must not size buffers).
pub const MAX_WINDOW: usize = 1 << 16;
use crate::error::{Error, Result};
use tract_onnx::pb::attribute_proto::AttributeType;
use tract_onnx::pb::{AttributeProto, NodeProto};

/// A node's attributes with its name and op type for error messages, and the importer's warning list.
pub struct Attrs<'a> {
    node: &'a NodeProto,
    /// The node's display name.
    pub name: &'a str,
    warnings: Warnings,
}

/// Warnings collected while importing (shared by every node's [`Attrs`]).
pub type Warnings = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

impl<'a> Attrs<'a> {
    /// Wraps a node; warnings go to `warnings`.
    pub fn new(node: &'a NodeProto, name: &'a str, warnings: Warnings) -> Self {
        Attrs {
            node,
            name,
            warnings,
        }
    }
    /// Records a warning about attribute `key`, naming the node and op.
    pub fn warn(&self, key: &str, msg: impl std::fmt::Display) {
        self.warnings.borrow_mut().push(format!(
            "node '{}' ({}): attribute '{key}': {msg}",
            crate::error::clip_name(self.name),
            crate::error::clip_name(&self.node.op_type)
        ));
    }
    fn get(&self, key: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == key)
    }
    /// The attribute `key` if present, after checking its declared type: every typed getter reads through
    /// here, so a value is never read from a field its type does not use (a STRING `axis` is not 0). A repeated
    /// attribute, a reference to a function's attribute, and a missing type (UNDEFINED, as onnxruntime and the
    /// ONNX checker also refuse) are errors.
    fn typed(&self, key: &str, want: AttributeType) -> Result<Option<&'a AttributeProto>> {
        let mut it = self.node.attribute.iter().filter(|a| a.name == key);
        let Some(a) = it.next() else {
            return Ok(None);
        };
        if it.next().is_some() {
            return Err(self.err(key, "is given more than once"));
        }
        if !a.ref_attr_name.is_empty() {
            return Err(self.err(
                key,
                "refers to a function's attribute (only allowed inside a function body)",
            ));
        }
        if a.r#type != want as i32 {
            let got = AttributeType::try_from(a.r#type)
                .map(|t| t.as_str_name().to_string())
                .unwrap_or_else(|_| format!("code {}", a.r#type));
            return Err(self.err(
                key,
                format!("has type {got}, expected {}", want.as_str_name()),
            ));
        }
        Ok(Some(a))
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
    /// An INT attribute or a default.
    pub fn int(&self, key: &str, default: i64) -> Result<i64> {
        Ok(self
            .typed(key, AttributeType::Int)?
            .map_or(default, |a| a.i))
    }
    /// An INT attribute in `range`, or a default.
    pub fn int_in(
        &self,
        key: &str,
        default: i64,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<i64> {
        let v = self.int(key, default)?;
        if !range.contains(&v) {
            return Err(self.err(
                key,
                format!("{v} is outside {}..={}", range.start(), range.end()),
            ));
        }
        Ok(v)
    }
    /// A FLOAT attribute or a default.
    pub fn float(&self, key: &str, default: f32) -> Result<f32> {
        Ok(self
            .typed(key, AttributeType::Float)?
            .map_or(default, |a| a.f))
    }
    /// A FLOAT attribute that must be finite (NaN policy, docs/fuzzing.md): where a NaN or infinite value makes
    /// every output NaN or infinite whatever the input, it is an error.
    pub fn finite(&self, key: &str, default: f32) -> Result<f32> {
        let v = self.float(key, default)?;
        if !v.is_finite() {
            return Err(self.every_output(key, v));
        }
        Ok(v)
    }
    /// The NaN policy's error: `v` makes every output NaN or infinite.
    pub fn every_output(&self, key: &str, v: f32) -> Error {
        self.err(key, format!("{v} makes every output NaN or infinite"))
    }
    /// A FLOAT attribute whose NaN or infinite value makes only some outputs NaN or infinite (NaN policy): a
    /// warning, and the value is kept.
    pub fn finite_or_warn(&self, key: &str, default: f32) -> Result<f32> {
        let v = self.float(key, default)?;
        if !v.is_finite() {
            self.warn(key, format!("{v} makes some outputs NaN or infinite"));
        }
        Ok(v)
    }
    /// A normalisation epsilon under the NaN policy: NaN or infinite is an error (every output would be NaN, or
    /// the bias alone), negative a warning (outputs are NaN where a variance is below -epsilon).
    pub fn epsilon(&self, default: f32) -> Result<f32> {
        let e = self.float("epsilon", default)?;
        if !e.is_finite() {
            return Err(self.err(
                "epsilon",
                format!("{e} makes every output NaN or meaningless"),
            ));
        }
        if e < 0.0 {
            self.warn(
                "epsilon",
                format!(
                    "{e} is negative: outputs are NaN where a variance is below {}",
                    -e
                ),
            );
        }
        Ok(e)
    }
    /// A NaN-free FLOAT attribute (a clamp bound or threshold compares false with NaN: every output would be NaN).
    pub fn not_nan(&self, key: &str, default: f32) -> Result<f32> {
        let v = self.float(key, default)?;
        if v.is_nan() {
            return Err(self.err(key, "NaN makes every output NaN"));
        }
        Ok(v)
    }
    /// An INTS attribute, if present.
    pub fn ints(&self, key: &str) -> Result<Option<&'a [i64]>> {
        Ok(self
            .typed(key, AttributeType::Ints)?
            .map(|a| a.ints.as_slice()))
    }
    /// A STRING attribute or a default.
    pub fn string(&self, key: &str, default: &str) -> Result<String> {
        match self.typed(key, AttributeType::String)? {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s.clone()).map_err(|_| self.err(key, "not UTF-8")),
        }
    }
    /// An ints attribute of exactly `n` non-negative values, or `default`.
    pub fn usizes(&self, key: &str, n: usize, default: usize) -> Result<Vec<usize>> {
        match self.ints(key)? {
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
    /// A TENSOR attribute, if present.
    pub fn tensor(&self, key: &str) -> Result<Option<&'a tract_onnx::pb::TensorProto>> {
        Ok(self
            .typed(key, AttributeType::Tensor)?
            .and_then(|a| a.t.as_ref()))
    }
    /// A FLOATS attribute, if present.
    pub fn floats(&self, key: &str) -> Result<Option<&'a [f32]>> {
        Ok(self
            .typed(key, AttributeType::Floats)?
            .map(|a| a.floats.as_slice()))
    }
    /// Resolves a possibly negative axis against `rank`.
    pub fn axis(&self, key: &str, default: i64, rank: usize) -> Result<usize> {
        let a = self.int(key, default)?;
        let r = rank as i64;
        if a < -r || a >= r.max(1) {
            return Err(self.err(key, format!("axis {a} out of range for rank {rank}")));
        }
        Ok(if a < 0 { (a + r) as usize } else { a as usize })
    }
}
