//! The log ring: order, overwrite of the oldest, level filter, callback, text truncation.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::string::ToString;
use std::vec::Vec;

use crate::{Level, Log, Record};

#[test]
fn ring_keeps_the_newest() {
    let mut log: Log<3> = Log::new();
    assert!(log.is_empty());
    for i in 0..5 {
        assert!(log.push(Level::Info, i, format_args!("event {i}")));
    }
    assert_eq!(log.len(), 3);
    assert_eq!(log.dropped(), 2);
    let texts: Vec<_> = log.iter().map(|r| r.text().to_string()).collect();
    assert_eq!(texts, ["event 2", "event 3", "event 4"]);
    let first = log.pop().unwrap();
    assert_eq!((first.time(), first.text()), (2, "event 2"));
    assert_eq!(log.len(), 2);
    log.push(Level::Error, 9, format_args!("late"));
    let texts: Vec<_> = log.iter().map(|r| r.text().to_string()).collect();
    assert_eq!(texts, ["event 3", "event 4", "late"]);
    log.clear();
    assert!(log.is_empty() && log.pop().is_none() && log.dropped() == 0);
}

#[test]
fn level_filter() {
    let mut log: Log<4> = Log::new();
    assert!(!log.push(Level::Debug, 0, format_args!("hidden")));
    assert!(log.push(Level::Warn, 0, format_args!("shown")));
    log.set_level(Level::Trace);
    assert!(log.push(Level::Trace, 0, format_args!("now shown")));
    assert_eq!(log.len(), 2);
    assert_eq!(
        log.iter().next().unwrap().to_string(),
        "[           0] WARN  shown"
    );
}

static SEEN: AtomicUsize = AtomicUsize::new(0);

fn count(record: &Record) {
    if record.text().starts_with("cb") {
        SEEN.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn callback_sees_accepted_records() {
    let mut log: Log<0> = Log::new();
    log.set_callback(Some(count));
    log.push(Level::Info, 0, format_args!("cb one"));
    log.push(Level::Trace, 0, format_args!("cb filtered"));
    log.push(Level::Error, 0, format_args!("cb two"));
    assert_eq!(SEEN.load(Ordering::Relaxed), 2);
    assert_eq!((log.len(), log.dropped()), (0, 2));
}

#[test]
fn long_text_is_cut_at_a_char_boundary() {
    let long = "é".repeat(100);
    let record = Record::new(Level::Info, 0, format_args!("{long}"));
    assert!(record.is_truncated());
    assert_eq!(record.text().len(), 96);
    assert!(record.text().chars().all(|c| c == 'é'));
    let record = Record::new(Level::Info, 0, format_args!("x{long}"));
    assert_eq!(record.text().len(), 95);
}
