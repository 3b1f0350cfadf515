//! A fixed-size log: a ring buffer of [`Record`]s with a level filter and an optional callback.
//!
//! Nothing allocates: a record's text is formatted into an inline buffer of [`RECORD_TEXT`] bytes (cut
//! at a character boundary), and when the ring is full the oldest record is overwritten and counted in
//! [`Log::dropped`]. The callback, if set, sees every accepted record as it is pushed — the hook for
//! forwarding to a UART, `defmt`, or `eprintln!`. Timestamps are whatever clock the caller passes
//! (the engine uses its port's `engine::Port::now_ns`).

use core::fmt::{self, Write};

/// Bytes of text kept per record.
pub const RECORD_TEXT: usize = 96;

/// Severity of a record; a log keeps records at or above its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Something failed.
    Error = 1,
    /// Something looks wrong.
    Warn = 2,
    /// Milestones: engine start, run start/end.
    Info = 3,
    /// Per-layer detail.
    Debug = 4,
    /// Everything.
    Trace = 5,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        })
    }
}

/// One log entry: level, timestamp and (possibly cut) text.
#[derive(Clone, Copy)]
pub struct Record {
    level: Level,
    time: u64,
    len: u8,
    truncated: bool,
    text: [u8; RECORD_TEXT],
}

impl Record {
    const EMPTY: Record = Record {
        level: Level::Trace,
        time: 0,
        len: 0,
        truncated: false,
        text: [0; RECORD_TEXT],
    };

    /// Formats a record.
    pub fn new(level: Level, time: u64, args: fmt::Arguments<'_>) -> Record {
        let mut record = Record {
            level,
            time,
            ..Record::EMPTY
        };
        // `TextBuf` never fails; it only cuts.
        let _ = record.writer().write_fmt(args);
        record
    }

    fn writer(&mut self) -> TextBuf<'_> {
        TextBuf { record: self }
    }

    /// Severity.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Timestamp given at push.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The text (cut to [`RECORD_TEXT`] bytes).
    pub fn text(&self) -> &str {
        // Cut at character boundaries only, so always UTF-8.
        core::str::from_utf8(&self.text[..self.len as usize]).unwrap_or("")
    }

    /// Whether the text was cut.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:>12}] {:<5} {}", self.time, self.level, self.text())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Appends to a record's text, cutting at a character boundary when full.
struct TextBuf<'r> {
    record: &'r mut Record,
}

impl Write for TextBuf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let r = &mut *self.record;
        let used = r.len as usize;
        let mut n = s.len().min(RECORD_TEXT - used);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        r.text[used..used + n].copy_from_slice(&s.as_bytes()[..n]);
        r.len = (used + n) as u8;
        if n < s.len() {
            r.truncated = true;
        }
        Ok(())
    }
}

/// Called with every record a [`Log`] accepts.
pub type LogCallback = fn(&Record);

/// A ring buffer of the last `N` records.
pub struct Log<const N: usize> {
    records: [Record; N],
    start: usize,
    len: usize,
    dropped: u64,
    level: Level,
    callback: Option<LogCallback>,
}

impl<const N: usize> Log<N> {
    /// An empty log keeping records at [`Level::Info`] and above, without callback.
    pub const fn new() -> Self {
        Log {
            records: [Record::EMPTY; N],
            start: 0,
            len: 0,
            dropped: 0,
            level: Level::Info,
            callback: None,
        }
    }

    /// Keeps records at `level` and above (more severe).
    pub fn set_level(&mut self, level: Level) {
        self.level = level;
    }

    /// The current level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Sets or clears the callback.
    pub fn set_callback(&mut self, callback: Option<LogCallback>) {
        self.callback = callback;
    }

    /// Whether a record at `level` would be kept.
    pub fn enabled(&self, level: Level) -> bool {
        level <= self.level
    }

    /// Formats and pushes a record; returns whether it passed the level filter.
    pub fn push(&mut self, level: Level, time: u64, args: fmt::Arguments<'_>) -> bool {
        if !self.enabled(level) {
            return false;
        }
        self.push_record(Record::new(level, time, args));
        true
    }

    /// Pushes a ready record (no level filter); overwrites the oldest when full.
    pub fn push_record(&mut self, record: Record) {
        if let Some(callback) = self.callback {
            callback(&record);
        }
        if N == 0 {
            self.dropped += 1;
            return;
        }
        if self.len == N {
            self.records[self.start] = record;
            self.start = (self.start + 1) % N;
            self.dropped += 1;
        } else {
            self.records[(self.start + self.len) % N] = record;
            self.len += 1;
        }
    }

    /// Removes and returns the oldest record.
    pub fn pop(&mut self) -> Option<Record> {
        if self.len == 0 {
            return None;
        }
        let record = self.records[self.start];
        self.start = (self.start + 1) % N;
        self.len -= 1;
        Some(record)
    }

    /// The records, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Record> + '_ {
        (0..self.len).map(move |i| &self.records[(self.start + i) % N])
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records the ring can hold.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Records overwritten (or not kept, for `N == 0`) since creation or [`Log::clear`].
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets every record and the dropped count.
    pub fn clear(&mut self) {
        self.start = 0;
        self.len = 0;
        self.dropped = 0;
    }
}

impl<const N: usize> Default for Log<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for Log<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
