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

impl Profile {
    /// Reads and checks a profile file.
    pub fn read(path: &Path) -> Result<Profile> {
        let bad = |m: String| Error::InvalidArgument {
            what: format!("profile '{}'", path.display()),
            message: m,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let p: Profile = serde_yaml_ng::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if p.version != VERSION {
            return Err(bad(format!(
                "version {} (this bundlec reads {VERSION})",
                p.version
            )));
        }
        for (name, s) in &p.tensors {
            Histogram::from_stats(s).map_err(|m| bad(format!("tensor '{name}': {m}")))?;
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
