//! A Rust application whose model was compiled by bundlec in `build.rs`: the generated `mlp` module names the
//! inputs and outputs with their shapes; bundle-rt runs it on the calling thread and on a 2-thread BSP engine.

include!(concat!(env!("OUT_DIR"), "/mlp.rs"));

use bundle_rt::engine::{Engine, StdPort};

// bundle-rt's Error is a fixed-size no_std value (128 bytes), larger than clippy's default limit.
#[allow(clippy::result_large_err)]
fn main() -> Result<(), bundle_rt::Error> {
    let bundle = mlp::bundle()?;
    println!("model inputs {:?}, outputs {:?}", mlp::INPUTS, mlp::OUTPUTS);
    let mut inst = bundle.instance()?;
    mlp::set_x(&mut inst, &[0.5, -1.0, 0.25, 2.0])?;
    inst.run()?;
    let y = mlp::y(&inst)?.to_vec();
    println!("y = {y:?}");
    let sum: f32 = y.iter().sum();
    if (sum - 1.0).abs() > 1e-5 {
        eprintln!("softmax output does not sum to 1: {sum}");
        std::process::exit(1);
    }
    let mut engine = Engine::new(StdPort::new(), 2)?;
    let mut inst2 = bundle.instance()?;
    mlp::set_x(&mut inst2, &[0.5, -1.0, 0.25, 2.0])?;
    engine.run(&mut inst2)?;
    let same = mlp::y(&inst2)? == &y[..];
    println!("2-thread engine bitwise equal to the entry function: {same}");
    if !same {
        std::process::exit(1);
    }
    Ok(())
}
