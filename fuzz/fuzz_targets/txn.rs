//! Transaction decoding and emulation: any bytes as a transaction binary run on the virtual NPU with small bound
//! buffers. The emulator must return `Ok` or an error; it must never panic, overflow or touch memory outside the
//! buffers it was given.
#![no_main]

use bundle_rt::npu::{Device, Emulator, NpuBuffers};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = vec![0x5au8; 4096];
    let mut output = vec![0u8; 4096];
    let mut scratch = vec![0u8; 16384];
    let constants = vec![0x11u8; 4096];
    let params = vec![0u8; 1024];
    let mut emu = Emulator::vnpu();
    let _ = emu.run(
        data,
        NpuBuffers {
            input: &input,
            output: &mut output,
            scratch: &mut scratch,
            constants: &constants,
            params: &params,
        },
    );
});
