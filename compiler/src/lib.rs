//! bundlec: an ahead-of-time compiler from ONNX models to bundles — a relocatable object with the model's code
//! and a Glow-compatible `NAME_config` table, the constant weights image, a C header and an XRT-style run
//! recipe. `pipeline` shows the stages in order; each stage is a module named for it.
#![deny(missing_docs)]

pub mod buildscript;
pub mod cli;
pub mod codegen;
pub mod emit;
pub mod error;
pub mod fsio;
pub mod import;
pub mod ir;
pub mod kernel;
pub mod lower;
pub mod npu;
pub mod partition;
pub mod passes;
pub mod pipeline;
pub mod plan;

pub mod profile;
pub mod x86;

pub use buildscript::BuildScript;
pub use error::{Error, Result};
pub use import::InputSpec;
pub use lower::Precision;
pub use pipeline::{compile_file, compile_graph, Bundle, Options, Report};
