//! Reading files that someone else named: the model, its external data, NPU target descriptions, partition
//! caches, profiles, calibration samples and bundle objects. Every read goes through here so that each one
//! accepts only a regular file (a FIFO, a device such as `/dev/zero`, a socket or a directory is refused before
//! a byte is read, and opening never blocks), never reads more than a stated limit (the size is checked before
//! the buffer is sized), and, for external data, stays inside the model's directory once every symlink is
//! resolved.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Largest ONNX model file: protobuf's own 2 GiB limit (larger weights belong in external data).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;
/// Largest JSON or YAML description (NPU target, partition cache, profile).
pub const MAX_TEXT_BYTES: u64 = 256 << 20;
/// Largest bundle object, weights file or transaction binary read back by `inspect`.
pub const MAX_OBJECT_BYTES: u64 = 4 << 30;

fn io_err(path: &Path, error: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        error,
    }
}

fn refuse(path: &Path, message: String) -> Error {
    io_err(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
    )
}

/// What a non-regular file is, for the error.
fn kind_name(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Opens `path` with `opts` without blocking (a FIFO with no writer, or for writing no reader, would block a
/// plain open) and without taking a terminal; returns the file and its metadata.
fn open_nonblocking(
    path: &Path,
    opts: &mut std::fs::OpenOptions,
) -> Result<(File, std::fs::Metadata)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = opts.open(path).map_err(|e| io_err(path, e))?;
    let meta = f.metadata().map_err(|e| io_err(path, e))?;
    Ok((f, meta))
}

/// Refuses anything but a regular file, naming what it is; `role` ends the message.
fn regular(path: &Path, ft: std::fs::FileType, role: &str) -> Result<()> {
    if ft.is_file() {
        return Ok(());
    }
    Err(refuse(path, format!("{}{role}", kind_name(&ft))))
}

/// Opens `path` for reading without blocking and returns the file with its size; anything but a regular file is
/// refused, naming what it is.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let (f, meta) = open_nonblocking(path, std::fs::OpenOptions::new().read(true))?;
    regular(path, meta.file_type(), " (only regular files are read)")?;
    Ok((f, meta.len()))
}

fn size_text(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else {
        format!("{n} bytes")
    }
}

/// Reads a whole regular file of at most `limit` bytes; `what` names the file's role in the error
/// ("an ONNX model", "an NPU target description").
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let (f, len) = open_regular(path)?;
    if len > limit {
        return Err(refuse(
            path,
            format!(
                "{} is larger than the limit of {} for {what}",
                size_text(len),
                size_text(limit)
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // The file may grow between the size check and the read: never take more than the limit.
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(refuse(
            path,
            format!("grew past the limit of {} for {what}", size_text(limit)),
        ));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path`, creating or truncating a regular file. An existing FIFO, device, socket or directory
/// there is refused (opening never blocks: a FIFO without a reader fails instead of waiting for one).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    const ROLE: &str = " is in the way (only regular files are written)";
    // Checked before opening too: opening a device can have effects of its own.
    if let Ok(meta) = std::fs::metadata(path) {
        regular(path, meta.file_type(), ROLE)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    let (mut f, meta) = open_nonblocking(path, opts.write(true).create(true).truncate(true))?;
    regular(path, meta.file_type(), ROLE)?;
    f.write_all(bytes).map_err(|e| io_err(path, e))
}

/// [`read_bounded`] for UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64, what: &str) -> Result<String> {
    let bytes = read_bounded(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| {
        refuse(
            path,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// Resolves an ONNX external-data `location` against the model's directory: a relative path whose canonical
/// form (every symlink resolved, the file's own included) lies inside the canonical model directory.
pub fn contained(dir: &Path, location: &str) -> std::result::Result<PathBuf, String> {
    let rel = Path::new(location);
    if location.is_empty() || location.contains('\0') {
        return Err(format!(
            "external data location '{}' is not a file name",
            location.escape_debug()
        ));
    }
    if rel.is_absolute()
        || rel.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(format!(
            "external data location '{}' must be a relative path inside the model's directory",
            location.escape_debug()
        ));
    }
    let base = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let root = base
        .canonicalize()
        .map_err(|e| format!("model directory '{}': {e}", base.display()))?;
    let full = base.join(rel);
    let real = full
        .canonicalize()
        .map_err(|e| format!("external data '{}': {e}", full.display()))?;
    if !real.starts_with(&root) {
        return Err(format!(
            "external data location '{}' resolves to '{}', outside the model's directory '{}' (through a \
             symlink)",
            location.escape_debug(),
            real.display(),
            root.display()
        ));
    }
    Ok(real)
}

/// Reads `length` bytes at `offset` of a regular file, after checking that the range lies inside the file;
/// only the range is read, so a huge or sparse file costs what the tensor needs.
pub fn read_range(path: &Path, offset: u64, length: u64) -> Result<Vec<u8>> {
    let (mut f, len) = open_regular(path)?;
    if offset.checked_add(length).is_none_or(|end| end > len) {
        return Err(refuse(
            path,
            format!("range {offset}+{length} lies beyond the end of the file ({len} bytes)"),
        ));
    }
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| io_err(path, e))?;
    let mut bytes = Vec::with_capacity(length as usize);
    f.take(length)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    if bytes.len() as u64 != length {
        return Err(refuse(
            path,
            format!("file ended after {} of {length} bytes", bytes.len()),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bundlec-fsio-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn refuses_devices_directories_and_big_files() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "a model").unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let d = tmp("dir");
        let e = read_bounded(&d, 1 << 20, "a model").unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let p = d.join("big");
        std::fs::write(&p, vec![7u8; 100]).unwrap();
        let e = read_bounded(&p, 99, "a model").unwrap_err();
        assert!(
            e.to_string().contains("larger than the limit of 99 bytes"),
            "{e}"
        );
        assert_eq!(read_bounded(&p, 100, "a model").unwrap().len(), 100);
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_fifo_without_blocking() {
        let d = tmp("fifo");
        let p = d.join("pipe");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_bounded(&p, 1 << 20, "a model").unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn containment_follows_symlinks() {
        let d = tmp("contain");
        let outside = tmp("outside");
        std::fs::write(outside.join("secret"), b"x").unwrap();
        std::fs::write(d.join("w.bin"), b"abcd").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("in")).unwrap();
        std::os::unix::fs::symlink(d.join("w.bin"), d.join("in/ok")).unwrap();
        assert!(contained(&d, "w.bin").is_ok());
        assert!(contained(&d, "in/ok").is_ok());
        for bad in [
            "link",
            "sub/secret",
            "../x",
            "/etc/passwd",
            "in/../../x",
            "",
        ] {
            let e = contained(&d, bad).unwrap_err();
            assert!(
                e.contains("outside") || e.contains("relative") || e.contains("not a file"),
                "{bad}: {e}"
            );
        }
        assert_eq!(read_range(&d.join("w.bin"), 1, 2).unwrap(), b"bc");
        assert!(read_range(&d.join("w.bin"), 3, 2).is_err());
        assert!(read_range(&d.join("w.bin"), u64::MAX, 2).is_err());
    }
}
