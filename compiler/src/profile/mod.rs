//! `bundlec profile`: runs the imported (unfused) f32 graph with the reference semantics of `ir/ops` over
//! calibration samples and records, for every f32 tensor by its ONNX name, the min / max and a histogram
//! (`histogram.rs`); `inputs.rs` reads the samples. The result is the profile document, a YAML file
//! (docs/profile-format.md) that `compile --load-profile` turns into an int8 bundle through
//! `passes::quantize`.

pub mod histogram;
pub mod inputs;

use crate::error::{Error, Result};
use crate::ir::{Graph, Tensor, TensorId};
use histogram::{Histogram, Stats};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The profile document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Format version (1).
    pub version: u32,
    /// The model file the profile was taken from.
    pub model: String,
    /// Calibration samples.
    pub samples: usize,
    /// Histogram bins per tensor.
    pub bins: usize,
    /// Statistics per ONNX tensor name (f32 tensors only).
    pub tensors: BTreeMap<String, Stats>,
}

/// Current profile format version.
pub const VERSION: u32 = 1;

/// Largest profile file read (256 MiB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Deepest flow-collection (`[...]`, `{...}`) nesting accepted. The YAML parser's time grows with the square of
/// the depth long before serde's recursion limit applies, so deeper text is refused before it is parsed.
pub const MAX_FLOW_DEPTH: usize = 128;

/// Refuses flow collections nested deeper than [`MAX_FLOW_DEPTH`], naming the line and its key. The scan is
/// approximate but conservative: brackets inside quoted scalars (a quote opens only where a scalar can start)
/// and comments do not count; every other bracket does.
fn check_flow_depth(text: &str) -> std::result::Result<(), String> {
    enum State {
        Plain,
        Single,
        Double,
        Comment,
    }
    let mut state = State::Plain;
    let (mut depth, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let mut prev = '\n';
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match state {
            State::Plain => match c {
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        let l = &text[line_start..];
                        let l = l.split('\n').next().unwrap_or("");
                        let key: String = l
                            .split(':')
                            .next()
                            .unwrap_or("")
                            .trim()
                            .chars()
                            .take(64)
                            .collect();
                        return Err(format!(
                            "line {line} ('{key}'): flow collections nested deeper than {MAX_FLOW_DEPTH}"
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '\'' | '"'
                    if matches!(prev, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':' | '-' | '?')
                        || (c == '\'' && prev == '\'') =>
                {
                    state = if c == '"' {
                        State::Double
                    } else {
                        State::Single
                    };
                }
                '#' if matches!(prev, ' ' | '\t' | '\n') => state = State::Comment,
                _ => {}
            },
            State::Single => {
                if c == '\'' {
                    state = State::Plain; // `''` (an escaped quote) closes and reopens
                }
            }
            State::Double => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    state = State::Plain;
                }
            }
            State::Comment => {
                if c == '\n' {
                    state = State::Plain;
                }
            }
        }
        if c == '\n' {
            line += 1;
            line_start = i + 1;
        }
        prev = c;
    }
    Ok(())
}

/// A name for an error message: at most 64 characters, marked when cut.
fn shorten(name: &str) -> String {
    match name.char_indices().nth(64) {
        Some((at, _)) => format!("{}...", &name[..at]),
        None => name.to_string(),
    }
}

impl Profile {
    /// Reads and checks a profile file.
    pub fn read(path: &Path) -> Result<Profile> {
        let bad = |m: String| Error::InvalidArgument {
            what: format!("profile '{}'", path.display()),
            message: m,
        };
        let text = crate::fsio::read_text_bounded(path, MAX_FILE_BYTES, "a profile")?;
        check_flow_depth(&text).map_err(bad)?;
        let p: Profile = serde_yaml_ng::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if p.version != VERSION {
            return Err(bad(format!(
                "version {} (this bundlec reads {VERSION})",
                p.version
            )));
        }
        // The first bad tensor with its reason, then how many others fail and (up to 8) which.
        let mut failing = p
            .tensors
            .iter()
            .filter_map(|(name, s)| Histogram::from_stats(s).err().map(|m| (name, m)));
        if let Some((name, m)) = failing.next() {
            let others: Vec<&String> = failing.map(|(n, _)| n).collect();
            let more = match others.len() {
                0 => String::new(),
                n => format!(
                    " (and {n} more tensor(s): {}{})",
                    others
                        .iter()
                        .take(8)
                        .map(|o| format!("'{}'", shorten(o)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if n > 8 { ", ..." } else { "" }
                ),
            };
            return Err(bad(format!("tensor '{}': {m}{more}", shorten(name))));
        }
        Ok(p)
    }
    /// The YAML text, with a comment header.
    pub fn to_yaml(&self) -> Result<String> {
        let body = serde_yaml_ng::to_string(self).map_err(|e| Error::internal("profile", e))?;
        Ok(format!(
            "# bundlec profile: per-tensor ranges of an f32 model over calibration inputs (docs/profile-format.md)\n{body}"
        ))
    }
    /// The accumulated statistics of a tensor.
    pub fn histogram(&self, tensor: &str) -> Option<Histogram> {
        self.tensors
            .get(tensor)
            .and_then(|s| Histogram::from_stats(s).ok())
    }
}

/// Evaluates the graph once per sample, accumulating statistics; `progress` is called after each sample.
pub fn profile(
    g: &Graph,
    model: &str,
    samples: &mut dyn Iterator<Item = Result<Vec<Tensor>>>,
    bins: usize,
    progress: &mut dyn FnMut(usize),
) -> Result<Profile> {
    let mut hist: HashMap<TensorId, Histogram> = HashMap::new();
    let mut n = 0;
    for sample in samples {
        crate::ir::eval::run(g, sample?, &mut |t, v| record(&mut hist, t, v, bins))
            .map_err(|m| Error::internal("profile", m))?;
        n += 1;
        progress(n);
    }
    let tensors = hist
        .into_iter()
        .map(|(t, h)| (g.tensors[t].name.clone(), h.stats()))
        .collect();
    Ok(Profile {
        version: VERSION,
        model: model.to_string(),
        samples: n,
        bins,
        tensors,
    })
}

fn record(hist: &mut HashMap<TensorId, Histogram>, t: TensorId, v: &Tensor, bins: usize) {
    if let Some(x) = v.as_f32() {
        hist.entry(t).or_insert_with(|| Histogram::new(bins)).add(x);
    }
}
