//! Streams the events of a profile file to a parser, one event at a time, in constant memory.
//!
//! Fast path (ORT's own format, a top-level array): the file is read in 1 MiB chunks and each event
//! is deserialized by serde straight from the chunk (borrowed strings, no copy); the deserializer's
//! byte offset says where the event ended. An event cut by the chunk edge is parsed again after the
//! next read. Other top-level objects (`{"traceEvents": [...]}`) go through serde_json's streaming
//! `Deserializer` with a `SeqAccess` visitor that buffers one element at a time. Either way only
//! about one chunk is in memory.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

/// Bytes read per chunk.
const CHUNK_BYTES: usize = 1 << 20;
/// Larger events are refused (ORT's are < 10 kB): bounds memory on a never-ending string.
const MAX_EVENT_BYTES: usize = 64 << 20;

/// Where something is in the file (1-based line, 1-based column, as serde_json reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    /// Line.
    pub line: usize,
    /// Column.
    pub column: usize,
}

/// Why the event stream stopped.
#[derive(Debug)]
pub enum StreamError {
    /// Input ended inside the JSON.
    Truncated(Position),
    /// Input is not JSON of the expected shape.
    Malformed(Position, String),
    /// Reading failed.
    Io(std::io::Error),
}

impl StreamError {
    /// Converts a serde_json error of a slice that starts at `origin` into a file-level error.
    pub fn from_json(err: &serde_json::Error, origin: Position) -> StreamError {
        let position = Position {
            line: origin.line + err.line().saturating_sub(1),
            column: if err.line() <= 1 { origin.column + err.column().saturating_sub(1) } else { err.column() },
        };
        let text = err.to_string();
        let message = text.rsplit_once(" at line ").map_or(text.as_str(), |(m, _)| m).to_string();
        if err.is_eof() {
            StreamError::Truncated(position)
        } else {
            StreamError::Malformed(position, message)
        }
    }
}

/// A parser of one event at the start of a slice, returning how many bytes the event took.
pub trait EventParser: FnMut(&[u8]) -> Result<usize, serde_json::Error> {}
impl<F: FnMut(&[u8]) -> Result<usize, serde_json::Error>> EventParser for F {}

/// Feeds every event of the profile to `parse`, in file order.
pub fn for_each_event<R: Read>(reader: R, mut parse: impl EventParser) -> Result<(), StreamError> {
    let mut input = Input { reader, buf: Vec::new(), pos: 0, eof: false, line: 0, line_start: 0, base: 0 };
    let mut state = State::BeforeArray;
    loop {
        while input.pos < input.buf.len() && matches!(input.buf[input.pos], b' ' | b'\t' | b'\r' | b'\n') {
            input.pos += 1;
        }
        if input.pos == input.buf.len() {
            if input.eof {
                return match state {
                    State::AfterArray => Ok(()),
                    _ => Err(StreamError::Truncated(input.position(input.pos))),
                };
            }
            input.refill()?;
            continue;
        }
        let at = input.pos;
        match (state, input.buf[at]) {
            (State::BeforeArray, b'[') => state = State::ExpectElementOrEnd,
            (State::BeforeArray, b'{') => {
                let head = std::io::Cursor::new(input.buf[at..].to_vec());
                return stream_object(head.chain(input.reader), &mut parse);
            }
            (State::BeforeArray, _) => {
                return Err(
                    input.malformed(at, r#"expected an array of trace events or an object {"traceEvents": [...]}"#)
                )
            }
            (State::ExpectElementOrEnd | State::ExpectElement, b'{') => match parse(&input.buf[at..]) {
                Ok(used) => {
                    input.pos += used;
                    state = State::ExpectCommaOrEnd;
                    continue;
                }
                Err(err) if err.is_eof() && !input.eof => {
                    if input.buf.len() - at > MAX_EVENT_BYTES {
                        return Err(input.malformed(at, "an event is larger than 64 MB"));
                    }
                    input.refill()?;
                    continue;
                }
                Err(err) => return Err(StreamError::from_json(&err, input.position(at))),
            },
            (State::ExpectElementOrEnd | State::ExpectCommaOrEnd, b']') => state = State::AfterArray,
            (State::ExpectCommaOrEnd, b',') => state = State::ExpectElement,
            (State::ExpectElementOrEnd | State::ExpectElement, _) => {
                return Err(input.malformed(at, "expected a trace event object"))
            }
            (State::ExpectCommaOrEnd, _) => return Err(input.malformed(at, "expected `,` or `]` after an event")),
            (State::AfterArray, _) => return Err(input.malformed(at, "trailing characters after the event array")),
        }
        input.pos += 1;
    }
}

/// What the top-level array expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeforeArray,
    ExpectElementOrEnd,
    ExpectElement,
    ExpectCommaOrEnd,
    AfterArray,
}

/// The read buffer: `buf[pos..]` is unconsumed; `base` is the file offset of `buf[0]`.
struct Input<R> {
    reader: R,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Newlines in the file before `buf[0]`.
    line: usize,
    /// File offset just after the last newline before `buf[0]`.
    line_start: usize,
    base: usize,
}

impl<R: Read> Input<R> {
    /// Drops consumed bytes (counting their newlines) and appends up to one chunk.
    fn refill(&mut self) -> Result<(), StreamError> {
        let consumed = &self.buf[..self.pos];
        self.line += memchr::memchr_iter(b'\n', consumed).count();
        if let Some(last) = memchr::memrchr(b'\n', consumed) {
            self.line_start = self.base + last + 1;
        }
        self.buf.drain(..self.pos);
        self.base += self.pos;
        self.pos = 0;
        let n = (&mut self.reader).take(CHUNK_BYTES as u64).read_to_end(&mut self.buf).map_err(StreamError::Io)?;
        self.eof = n == 0;
        Ok(())
    }

    /// File position of `buf[at]`.
    fn position(&self, at: usize) -> Position {
        let before = &self.buf[..at];
        let newlines = memchr::memchr_iter(b'\n', before).count();
        let line_start = memchr::memrchr(b'\n', before).map_or(self.line_start, |i| self.base + i + 1);
        Position { line: self.line + newlines + 1, column: self.base + at - line_start + 1 }
    }

    fn malformed(&self, at: usize, message: &str) -> StreamError {
        StreamError::Malformed(self.position(at), message.to_string())
    }
}

/// The slow path: `{"traceEvents": [...], …}` through serde_json's streaming deserializer.
fn stream_object<R: Read>(reader: R, parse: &mut impl EventParser) -> Result<(), StreamError> {
    let origin = Position { line: 1, column: 1 };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut failure = None;
    let result = de.deserialize_map(TopLevelObject { parse, failure: &mut failure }).and_then(|()| de.end());
    match (failure, result) {
        (Some(err), _) => Err(err),
        (None, Err(err)) if err.is_io() => Err(StreamError::Io(std::io::Error::other(err))),
        (None, Err(err)) => Err(StreamError::from_json(&err, origin)),
        (None, Ok(())) => Ok(()),
    }
}

/// Visits the top-level object, streaming its `traceEvents` array.
struct TopLevelObject<'s, F> {
    parse: &'s mut F,
    failure: &'s mut Option<StreamError>,
}

impl<'de, F: EventParser> Visitor<'de> for TopLevelObject<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"an object {"traceEvents": [...]}"#)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "traceEvents" {
                map.next_value_seed(EventArray { parse: &mut *self.parse, failure: &mut *self.failure })?;
                found = true;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if found {
            Ok(())
        } else {
            Err(de::Error::custom("object has no traceEvents array"))
        }
    }
}

/// Streams the `traceEvents` array one buffered element at a time.
struct EventArray<'s, F> {
    parse: &'s mut F,
    failure: &'s mut Option<StreamError>,
}

impl<'de, F: EventParser> DeserializeSeed<'de> for EventArray<'_, F> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: EventParser> Visitor<'de> for EventArray<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(event) = seq.next_element::<Box<RawValue>>()? {
            if let Err(err) = (self.parse)(event.get().as_bytes()) {
                let origin = Position { line: 1, column: 1 };
                *self.failure = Some(StreamError::from_json(&err, origin));
                return Err(de::Error::custom("event rejected"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects each event's raw text.
    fn events(text: &str) -> Result<Vec<String>, StreamError> {
        let mut out = Vec::new();
        for_each_event(text.as_bytes(), |bytes: &[u8]| {
            let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<&RawValue>();
            if let Some(raw) = values.next().transpose()? {
                out.push(raw.get().to_string());
            }
            Ok(values.byte_offset())
        })?;
        Ok(out)
    }

    #[test]
    fn splits_nested_objects_and_strings_with_brackets() {
        let got = events("[\n{\"a\":{\"b\":[1,{}]},\"s\":\"}]\\\"{\"},\n {\"c\":1}\n]\n").unwrap();
        assert_eq!(got, [r#"{"a":{"b":[1,{}]},"s":"}]\"{"}"#, r#"{"c":1}"#]);
    }

    #[test]
    fn events_across_chunk_edges_are_reparsed_whole() {
        let event = format!(r#"{{"pad":"{}"}}"#, "x".repeat(CHUNK_BYTES / 3));
        let text = format!("[{}]", [event.as_str(); 7].join(",\n"));
        assert_eq!(events(&text).unwrap().len(), 7);
    }

    #[test]
    fn wrapper_object_goes_through_serde() {
        let got = events(r#"{"x":[1,2],"traceEvents":[{"n":1},{"n":2}],"y":{}}"#).unwrap();
        assert_eq!(got, [r#"{"n":1}"#, r#"{"n":2}"#]);
    }

    #[test]
    fn truncation_and_garbage_are_located() {
        assert!(matches!(events("[{\"a\":1},\n{\"b\""), Err(StreamError::Truncated(Position { line: 2, .. }))));
        assert!(matches!(events(""), Err(StreamError::Truncated(_))));
        assert!(matches!(events("[1]"), Err(StreamError::Malformed(_, m)) if m.contains("event object")));
        assert!(matches!(events("[{}] x"), Err(StreamError::Malformed(_, m)) if m.contains("trailing")));
        assert!(matches!(events("[{} {}]"), Err(StreamError::Malformed(_, m)) if m.contains("`,` or `]`")));
        assert!(matches!(events("\"str\""), Err(StreamError::Malformed(_, m)) if m.contains("traceEvents")));
        assert!(matches!(events(r#"{"other":1}"#), Err(StreamError::Malformed(_, m)) if m.contains("traceEvents")));
        let Err(StreamError::Malformed(at, _)) = events("[{},\n  {\"a\" 1}]") else { panic!("not malformed") };
        assert_eq!(at, Position { line: 2, column: 8 });
    }
}
