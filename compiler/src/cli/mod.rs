//! The `bundlec` command line, as a library function so that the `bundlec` binary and the Python package's
//! `python -m bundlec` are the same program: `compile` (ONNX → bundle files), `partition` (the NPU placement
//! table), `ops` (the supported op list, or the NPU's with `--npu`), `profile` (calibration ranges for int8) and
//! `inspect` (read back a bundle object, or disassemble a transaction binary with `--txn`). This module owns the
//! arguments and [`main_with`]; `run.rs` carries the commands out. It is the one place that uses `anyhow`.

mod args;
mod run;

use args::Cli;
use clap::Parser;
use std::ffi::OsString;

/// Runs the command line `args` (the program name first, as `std::env::args_os` gives it) and returns the
/// process exit code: 0, 1 after an error (printed to stderr, clipped), or clap's code for a usage error or
/// `--help`/`--version` (printed as clap prints them).
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match run::run(cli.cmd) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {}", run::clip_message(&format!("{e:#}")));
            1
        }
    }
}
