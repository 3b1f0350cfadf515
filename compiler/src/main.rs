//! The `bundlec` binary: the command line of `bundlec::cli`.

fn main() {
    // Die quietly when stdout is a closed pipe (`bundlec ops | head`), like other Unix tools, instead of
    // panicking in `println!`.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(bundlec::cli::main_with(std::env::args_os()));
}
