//! Raw records to chunk payloads and back.
//!
//! Each record starts with an opcode byte:
//! ```text
//! bits 0-1  phase: 0 START, 1 END, 2 ATOMIC, 3 definition
//! events:  bit 2 same kind as the previous event (for user events: the same user event),
//!          bit 3 same callsite, bit 4 same arguments as the previous event of this kind,
//!          bit 5 pointers-to-shared resolved, bit 6 arguments not read,
//!          bit 7 as many argument words as the previous event of this kind
//!          then [kind [user event id]] [callsite] ts-delta [[nargs] args]
//! definitions: bits 2-7 the definition type:
//!          0 string   id, len, bytes
//!          1 callsite id, file string id (0: none), line, column
//!          2 user event  id, name, description (flag, len, bytes), why unreadable (len, bytes)
//!          3 time     an absolute timestamp the next delta is taken from (time went backwards)
//! ```
//! Timestamps are deltas from the previous event (the chunk's `base_ts` for
//! the first). Each argument word is coded against the same word of the
//! previous event of the same kind (user events: of the same user event): as
//! a zigzag delta, or for `double` arguments of user events as the XOR of the
//! two bit patterns, written as a byte `leading_zero_bytes << 4 | length`
//! and the `length` significant bytes (a lone 0 when equal). The user event's
//! id is not repeated among its arguments.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::chunk::ChunkHeader;
use crate::kinds::{self, ArgType};
use crate::raw::{RawHeader, FLAG_ARGS_UNREAD, FLAG_PTS_RESOLVED, HEADER_WORDS};
use crate::user::{self, VaType};
use crate::varint::{self, Reader};

const OP_SAME_KIND: u8 = 1 << 2;
const OP_SAME_SITE: u8 = 1 << 3;
const OP_SAME_ARGS: u8 = 1 << 4;
const OP_RESOLVED: u8 = 1 << 5;
const OP_UNREAD: u8 = 1 << 6;
const OP_SAME_NARGS: u8 = 1 << 7;
const DEF_STRING: u8 = 3;
const DEF_CALLSITE: u8 = 3 | 1 << 2;
const DEF_USER: u8 = 3 | 2 << 2;
const DEF_TIME: u8 = 3 | 3 << 2;
/// Kinds below this number keep their previous arguments in an array.
const KIND_SLOTS: usize = 512;

/// A user event as created by `gasp_create_event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserDef {
    /// The id returned to the program.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its printf-style format, if any.
    pub desc: Option<String>,
    /// Why its arguments are not read, when they are not.
    pub unreadable: Option<String>,
}

/// What the encoder needs from the process that recorded the raw records.
pub trait Resolver {
    /// The NUL-terminated string at address `ptr` (never 0).
    fn string_at(&mut self, ptr: u64) -> Vec<u8>;
    /// The user event with this id.
    fn user_event(&mut self, id: u64) -> Option<UserDef>;
}

/// The bytes a system event moves or allocates (its `n`, `nbytes` or `size`
/// argument), counted on its START or ATOMIC; 0 for other events.
pub fn bytes_moved(kind: u16, phase: u8, pts_words: usize, flags: u8, args: &[u64]) -> u64 {
    bytes_arg(kind, phase, pts_words, flags).map_or(0, |i| args.get(i).copied().unwrap_or(0))
}

/// Where [`bytes_moved`] finds the bytes among the argument words of such an
/// event, if it counts any: the same for every event of the same kind,
/// phase and flags (in a stream, whose `pts_words` is fixed).
pub fn bytes_arg(kind: u16, phase: u8, pts_words: usize, flags: u8) -> Option<usize> {
    if phase == crate::raw::PHASE_END {
        return None;
    }
    let k = kinds::kind(kind)?;
    if !matches!(k.class, kinds::Class::Comm | kinds::Class::Memory) {
        return None;
    }
    let mut i = 0;
    for (name, _, n) in arg_layout(kind, phase, pts_words, flags) {
        if matches!(name, "n" | "nbytes" | "size") {
            return Some(i);
        }
        i += n;
    }
    None
}

/// Where the `codeptr` argument (a return address) is among the argument
/// words of an event of `kind`, `phase` and `flags`, if its layout has one.
pub fn codeptr_word(kind: u16, phase: u8, pts_words: usize, flags: u8) -> Option<usize> {
    let mut off = 0;
    for (name, _, n) in arg_layout(kind, phase, pts_words, flags) {
        if name == "codeptr" {
            return Some(off);
        }
        off += n;
    }
    None
}

/// The argument words of one event, split per argument.
pub fn arg_layout(
    kind: u16,
    phase: u8,
    pts_words: usize,
    flags: u8,
) -> Vec<(&'static str, ArgType, usize)> {
    let Some(k) = kinds::kind(kind) else {
        return Vec::new();
    };
    let list = if phase == crate::raw::PHASE_END {
        k.end
    } else {
        k.start
    };
    let pts = if flags & FLAG_PTS_RESOLVED != 0 {
        2
    } else {
        pts_words
    };
    list.iter()
        .map(|&(n, t)| {
            (
                n,
                t,
                if matches!(t, ArgType::Pts | ArgType::Lock) {
                    pts
                } else {
                    1
                },
            )
        })
        .collect()
}

/// Which argument words of a user event are `double`s, word by word
/// (a `%s` takes a length word and the words of its bytes).
#[derive(Debug)]
struct WordClasses<'a> {
    args: &'a [VaType],
    i: usize,
    str_left: usize,
}

impl<'a> WordClasses<'a> {
    fn new(args: &'a [VaType]) -> Self {
        WordClasses {
            args,
            i: 0,
            str_left: 0,
        }
    }
    /// Whether the next word is a floating-point value.
    #[inline]
    fn next_is_float(&self) -> bool {
        self.str_left == 0
            && matches!(
                self.args.get(self.i),
                Some(VaType::Double | VaType::LongDouble)
            )
    }
    /// Moves past the next word, whose value is `v`.
    #[inline]
    fn feed(&mut self, v: u64) {
        if self.str_left > 0 {
            self.str_left -= 1;
            return;
        }
        if self.args.get(self.i) == Some(&VaType::Str) {
            self.str_left = (v as usize).min(user::MAX_STR).div_ceil(8);
        }
        self.i += 1;
    }
}

/// The schema of a user event's arguments, empty when it has none or they are not read.
fn user_schema(def: &UserDef) -> Vec<VaType> {
    match (&def.desc, &def.unreadable) {
        (Some(d), None) => user::parse_format(d).map(|s| s.args).unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[inline]
fn put_xor(p: &mut Vec<u8>, x: u64) {
    if x == 0 {
        p.push(0);
        return;
    }
    let lz = x.leading_zeros() as usize / 8;
    let tz = x.trailing_zeros() as usize / 8;
    let len = 8 - lz - tz;
    p.push(((lz as u8) << 4) | len as u8);
    let b = x.to_be_bytes();
    p.extend_from_slice(&b[lz..lz + len]);
}

fn get_xor(r: &mut Reader<'_>) -> Result<u64, varint::Truncated> {
    let h = r.byte()?;
    if h == 0 {
        return Ok(0);
    }
    let (lz, len) = ((h >> 4) as usize, (h & 0x0f) as usize);
    if len == 0 || lz + len > 8 {
        return Err(varint::Truncated);
    }
    let mut b = [0u8; 8];
    b[lz..lz + len].copy_from_slice(r.bytes(len)?);
    Ok(u64::from_be_bytes(b))
}

/// User events keep their previous arguments in this many slots, by id
/// modulo the count; a slot holding another id counts as empty
/// (`GASPARD_USER_SLOTS` of the C encoder).
const USER_SLOTS: usize = 16;
/// User-event arguments longer than this are not remembered (`GASPARD_USER_WORDS`).
const USER_WORDS: usize = 32;

/// Kinds from 512 on (the adapters' many kinds) share this many slots, by
/// number modulo the count, a slot held by another kind counting as empty
/// (`GASPARD_SHARED_SLOTS` of the C encoder).
const SHARED_FIRST: u16 = 512;
const SHARED_SLOTS: usize = 64;

/// Previous argument words: per kind, per shared slot, and per user-event slot.
#[derive(Debug)]
struct PrevArgs {
    kinds: Vec<Vec<u64>>,
    other: FxHashMap<u16, Vec<u64>>,
    shared: [(u16, Vec<u64>); SHARED_SLOTS],
    users: [(u64, Vec<u64>); USER_SLOTS],
}

impl Default for PrevArgs {
    fn default() -> Self {
        PrevArgs {
            kinds: vec![Vec::new(); KIND_SLOTS],
            other: FxHashMap::default(),
            shared: std::array::from_fn(|_| (u16::MAX, Vec::new())),
            users: std::array::from_fn(|_| (u64::MAX, Vec::new())),
        }
    }
}

impl PrevArgs {
    /// The previous arguments of this kind or user event.
    #[inline]
    fn get(&mut self, kind: u16, user: Option<u64>) -> &mut Vec<u64> {
        match user {
            Some(u) => {
                let slot = &mut self.users[(u % USER_SLOTS as u64) as usize];
                if slot.0 != u {
                    slot.0 = u;
                    slot.1.clear();
                }
                &mut slot.1
            }
            None if kind >= SHARED_FIRST => {
                let slot = &mut self.shared[kind as usize % SHARED_SLOTS];
                if slot.0 != kind {
                    slot.0 = kind;
                    slot.1.clear();
                }
                &mut slot.1
            }
            None if (kind as usize) < KIND_SLOTS => &mut self.kinds[kind as usize],
            None => self.other.entry(kind).or_default(),
        }
    }
}

/// Appends `words` to `v`. An event's arguments are a few words:
/// `extend_from_slice` once took 7 % of a report's time in `memmove`. The
/// copied iterator checks the capacity once and copies with `memcpy`: 1.5 %
/// fewer instructions in a report than pushing word by word, and the same
/// time (8 interleaved runs of a 20 M-event report). Up to six words, a copy
/// of a length known here, made in line: 1.9 % fewer instructions again
/// than calling `memcpy` (and the same time).
#[inline]
pub fn push_words(v: &mut Vec<u64>, words: &[u64]) {
    match *words {
        [] => {}
        [a] => v.push(a),
        [a, b] => v.extend_from_slice(&[a, b]),
        [a, b, c] => v.extend_from_slice(&[a, b, c]),
        [a, b, c, d] => v.extend_from_slice(&[a, b, c, d]),
        [a, b, c, d, e] => v.extend_from_slice(&[a, b, c, d, e]),
        [a, b, c, d, e, f] => v.extend_from_slice(&[a, b, c, d, e, f]),
        _ => v.extend(words.iter().copied()),
    }
}

/// Whether two argument lists are the same, compared word by word (a few
/// words: `==` on slices calls `memcmp`, 6 % of a report's time).
#[inline]
pub fn same_words(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Remembers `args` as the previous arguments, as the C encoder does.
#[inline]
fn remember(prev: &mut Vec<u64>, args: &[u64], user: bool) {
    prev.clear();
    if !user || args.len() <= USER_WORDS {
        push_words(prev, args);
    }
}

/// Turns raw records into one chunk's payload.
#[derive(Debug, Default)]
pub struct Encoder {
    payload: Vec<u8>,
    strings: FxHashMap<u64, u32>,
    callsites: FxHashMap<(u64, u32, u16), u32>,
    last_site_key: Option<(u64, u32, u16)>,
    users: FxHashMap<u64, Vec<VaType>>,
    prev: PrevArgs,
    last_kind: Option<(u16, Option<u64>)>,
    last_site: u32,
    base_ts: u64,
    last_ts: u64,
    events: u32,
    func_arg: [u64; 1],
}

impl Encoder {
    /// A fresh encoder for one chunk.
    pub fn new() -> Self {
        Encoder::default()
    }

    /// Events encoded so far.
    pub fn events(&self) -> u32 {
        self.events
    }

    /// Bytes of payload so far.
    pub fn len(&self) -> usize {
        self.payload.len()
    }

    /// True before the first record.
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    fn string_id(&mut self, ptr: u64, res: &mut dyn Resolver) -> u32 {
        if ptr == 0 {
            return 0;
        }
        if let Some(&id) = self.strings.get(&ptr) {
            return id;
        }
        let id = self.strings.len() as u32 + 1;
        self.strings.insert(ptr, id);
        let bytes = res.string_at(ptr);
        self.payload.push(DEF_STRING);
        varint::put_u64(&mut self.payload, u64::from(id));
        put_bytes(&mut self.payload, &bytes);
        id
    }

    #[inline]
    fn callsite(&mut self, file: u64, line: u32, col: u16, res: &mut dyn Resolver) -> u32 {
        let key = (file, line, col);
        if self.last_site_key == Some(key) {
            return self.last_site;
        }
        self.callsite_slow(key, res)
    }

    #[cold]
    fn callsite_slow(&mut self, key: (u64, u32, u16), res: &mut dyn Resolver) -> u32 {
        self.last_site_key = Some(key);
        let (file, line, col) = key;
        if file == 0 && line == 0 && col == 0 {
            return 0;
        }
        if let Some(&id) = self.callsites.get(&key) {
            return id;
        }
        let fid = self.string_id(file, res);
        let id = self.callsites.len() as u32 + 1;
        self.callsites.insert(key, id);
        self.payload.push(DEF_CALLSITE);
        for v in [
            u64::from(id),
            u64::from(fid),
            u64::from(line),
            u64::from(col),
        ] {
            varint::put_u64(&mut self.payload, v);
        }
        id
    }

    #[cold]
    fn define_user(&mut self, id: u64, res: &mut dyn Resolver) {
        let def = res.user_event(id).unwrap_or(UserDef {
            id,
            name: format!("user_event_{id}"),
            desc: None,
            unreadable: None,
        });
        write_user_definition(&mut self.payload, &def);
        self.users.insert(id, user_schema(&def));
    }

    /// Encodes the record at the start of `words`; returns the words it used,
    /// or `None` when `words` does not hold a whole record.
    pub fn push(&mut self, words: &[u64], res: &mut dyn Resolver) -> Option<usize> {
        if words.len() < HEADER_WORDS {
            return None;
        }
        let h = RawHeader::unpack(words);
        let n = HEADER_WORDS + h.nwords as usize;
        let mut args = words.get(HEADER_WORDS..n)?;
        let site = self.callsite(h.file, h.line, h.col, res);
        let mut user = None;
        if h.kind == kinds::GASPARD_USER && !args.is_empty() {
            let id = args[0];
            if !self.users.contains_key(&id) {
                self.define_user(id, res);
            }
            user = Some(id);
            args = &args[1..];
        } else if h.kind == kinds::C_FUNC && !args.is_empty() {
            self.func_arg[0] = u64::from(self.string_id(args[0], res));
            args = &self.func_arg;
        }
        if self.events == 0 {
            self.base_ts = h.ts;
            self.last_ts = h.ts;
        }
        let key = (h.kind, user);
        let mut op = h.phase & 3;
        if self.last_kind == Some(key) {
            op |= OP_SAME_KIND;
        }
        if site == self.last_site && self.events > 0 {
            op |= OP_SAME_SITE;
        }
        if h.flags & FLAG_PTS_RESOLVED != 0 {
            op |= OP_RESOLVED;
        }
        if h.flags & FLAG_ARGS_UNREAD != 0 {
            op |= OP_UNREAD;
        }
        let schema: &[VaType] = match user {
            Some(u) => self.users.get(&u).map_or(&[], |v| v.as_slice()),
            None => &[],
        };
        let prev = self.prev.get(h.kind, user);
        let same_args = prev.as_slice() == args;
        if same_args {
            op |= OP_SAME_ARGS;
        } else if prev.len() == args.len() {
            op |= OP_SAME_NARGS;
        }
        let p = &mut self.payload;
        p.reserve(32 + 10 * args.len());
        if h.ts < self.last_ts {
            // Time went backwards: deltas restart from this event.
            p.push(DEF_TIME);
            varint::put_u64(p, h.ts);
            self.last_ts = h.ts;
        }
        p.push(op);
        if op & OP_SAME_KIND == 0 {
            varint::put_u64(p, u64::from(h.kind));
            if let Some(u) = user {
                varint::put_u64(p, u);
            }
        }
        if op & OP_SAME_SITE == 0 {
            varint::put_u64(p, u64::from(site));
        }
        varint::put_u64(p, h.ts - self.last_ts);
        if !same_args {
            if op & OP_SAME_NARGS == 0 {
                varint::put_u64(p, args.len() as u64);
            }
            let mut classes = WordClasses::new(schema);
            for (i, &a) in args.iter().enumerate() {
                let before = prev.get(i).copied().unwrap_or(0);
                if classes.next_is_float() {
                    put_xor(p, a ^ before);
                } else {
                    varint::put_i64(p, a.wrapping_sub(before) as i64);
                }
                classes.feed(a);
            }
            remember(prev, args, user.is_some());
        }
        self.last_kind = Some(key);
        self.last_site = site;
        self.last_ts = h.ts;
        self.events += 1;
        Some(n)
    }

    /// Finishes the chunk: its header bytes and payload. The encoder is reset.
    pub fn finish(&mut self, mut header: ChunkHeader) -> (Vec<u8>, ChunkHeader) {
        header.version = crate::FORMAT_VERSION as u16;
        header.events = self.events;
        header.base_ts = self.base_ts;
        header.last_ts = self.last_ts;
        header.payload_len = self.payload.len() as u32;
        let mut out = Vec::with_capacity(crate::chunk::CHUNK_HEADER_LEN + self.payload.len());
        out.extend_from_slice(&header.to_bytes(&self.payload));
        out.extend_from_slice(&self.payload);
        *self = Encoder::new();
        (out, header)
    }
}

/// Longest user event name, description and reason written to a trace.
const USER_NAME_MAX: usize = 256;
const USER_DESC_MAX: usize = 1024;

/// Writes a user event's definition record (name, description and reason
/// cut to 256, 1024 and 256 bytes, so that it fits the recorder's margin).
pub fn write_user_definition(p: &mut Vec<u8>, def: &UserDef) {
    let cut = |s: &str, n: usize| -> Vec<u8> {
        let mut end = s.len().min(n);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.as_bytes()[..end].to_vec()
    };
    p.push(DEF_USER);
    varint::put_u64(p, def.id);
    put_bytes(p, &cut(&def.name, USER_NAME_MAX));
    match &def.desc {
        Some(d) => {
            p.push(1);
            put_bytes(p, &cut(d, USER_DESC_MAX));
        }
        None => p.push(0),
    }
    put_bytes(
        p,
        &cut(def.unreadable.as_deref().unwrap_or(""), USER_NAME_MAX),
    );
}

fn put_bytes(p: &mut Vec<u8>, b: &[u8]) {
    varint::put_u64(p, b.len() as u64);
    p.extend_from_slice(b);
}

/// A callsite: file (string id, 0 when unknown), line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Callsite {
    /// String id of the file name, 0 when unknown.
    pub file: u32,
    /// Line, 0 when unknown.
    pub line: u32,
    /// Column, 0 when unknown.
    pub col: u32,
}

/// One decoded event; its arguments are in [`DecodedChunk::args`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Timestamp in clock ticks.
    pub ts: u64,
    /// Canonical kind.
    pub kind: u16,
    /// START, END or ATOMIC.
    pub phase: u8,
    /// `raw::FLAG_*` bits.
    pub flags: u8,
    /// Callsite id within the chunk (0: none).
    pub callsite: u32,
    /// Index of the first argument word.
    pub args_start: u32,
    /// Number of argument words.
    pub nargs: u32,
}

/// A decoded chunk with its own tables.
#[derive(Debug, Default)]
pub struct DecodedChunk {
    /// The events in order.
    pub events: Vec<Event>,
    /// All argument words.
    pub args: Vec<u64>,
    /// Strings by id.
    pub strings: HashMap<u32, String>,
    /// Callsites by id.
    pub callsites: HashMap<u32, Callsite>,
    /// User events by id.
    pub users: HashMap<u64, UserDef>,
}

impl DecodedChunk {
    /// The argument words of `e`.
    pub fn args_of(&self, e: &Event) -> &[u64] {
        &self.args[e.args_start as usize..(e.args_start + e.nargs) as usize]
    }
    /// A string by id.
    pub fn string(&self, id: u32) -> Option<&str> {
        self.strings.get(&id).map(|s| s.as_str())
    }
}

/// Where and why a payload could not be decoded to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset in the payload.
    pub offset: usize,
    /// What was wrong.
    pub what: String,
}

macro_rules! tr {
    ($r:ident, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(_) => {
                return Err(DecodeError {
                    offset: $r.pos(),
                    what: "record cut short".into(),
                })
            }
        }
    };
}

/// Decodes a payload. On error the events before it are kept in `out`.
pub fn decode(
    header: &ChunkHeader,
    payload: &[u8],
    out: &mut DecodedChunk,
) -> Result<(), DecodeError> {
    decode_into(header, payload, out)
}

/// What a chunk holds, handed over record by record by [`decode_into`]:
/// a reader keeps what it needs (all of it, for [`DecodedChunk`]).
pub trait Sink {
    /// A string definition.
    fn string(&mut self, id: u32, s: String);
    /// A callsite definition.
    fn callsite(&mut self, id: u32, c: Callsite);
    /// A user event definition.
    fn user(&mut self, def: UserDef);
    /// An event: `e.args_start` and `e.nargs` are not set; its user event id
    /// (for `GASPARD_USER`) and its argument words come apart.
    fn event(&mut self, e: Event, user: Option<u64>, args: &[u64]);
    /// An event of a system kind whose argument words are those of the
    /// previous event of its kind in the chunk (as the chunk says, without
    /// comparing them): by default, [`Sink::event`].
    #[inline(always)]
    fn event_same_args(&mut self, e: Event, args: &[u64]) {
        self.event(e, None, args)
    }
    /// Whether the argument words of events of the system kind `kind` are
    /// wanted: when not, they are skipped (not decoded) and [`Sink::event`]
    /// gets none. The answer must be the same for a kind all along a chunk
    /// (its words are coded against the previous ones of the kind). User
    /// events always come with their words.
    #[inline(always)]
    fn wants_args(&mut self, _kind: u16) -> bool {
        true
    }
}

impl Sink for DecodedChunk {
    fn string(&mut self, id: u32, s: String) {
        self.strings.insert(id, s);
    }
    fn callsite(&mut self, id: u32, c: Callsite) {
        self.callsites.insert(id, c);
    }
    fn user(&mut self, def: UserDef) {
        self.users.insert(def.id, def);
    }
    #[inline]
    fn event(&mut self, mut e: Event, user: Option<u64>, args: &[u64]) {
        let start = self.args.len();
        if let Some(u) = user {
            self.args.push(u);
        }
        push_words(&mut self.args, args);
        e.args_start = start as u32;
        e.nargs = (self.args.len() - start) as u32;
        self.events.push(e);
    }
}

/// Decodes a payload into any [`Sink`]. On error what came before it has
/// been handed over.
pub fn decode_into<S: Sink>(
    header: &ChunkHeader,
    payload: &[u8],
    out: &mut S,
) -> Result<(), DecodeError> {
    let mut r = Reader::new(payload);
    let mut last: Option<(u16, Option<u64>)> = None;
    let mut last_site = 0u32;
    let mut last_ts = header.base_ts;
    let mut schemas: FxHashMap<u64, Vec<VaType>> = FxHashMap::default();
    // Previous argument words of each kind (user events: of each user-event slot), without the id.
    let mut prev = PrevArgs::default();
    let mut scratch: Vec<u64> = Vec::new();
    let err = |r: &Reader<'_>, what: &str| DecodeError {
        offset: r.pos(),
        what: what.into(),
    };
    while !r.is_empty() {
        let op = tr!(r, r.byte());
        // Definitions have both low bits set; events (most records) not.
        if op & 3 == 3 {
            match op {
                DEF_STRING => {
                    let id = tr!(r, r.u64()) as u32;
                    let s = tr!(r, get_string(&mut r));
                    out.string(id, s);
                }
                DEF_CALLSITE => {
                    let mut v = [0u64; 4];
                    for x in &mut v {
                        *x = tr!(r, r.u64());
                    }
                    out.callsite(
                        v[0] as u32,
                        Callsite {
                            file: v[1] as u32,
                            line: v[2] as u32,
                            col: v[3] as u32,
                        },
                    );
                }
                DEF_TIME => {
                    last_ts = tr!(r, r.u64());
                }
                DEF_USER => {
                    let id = tr!(r, r.u64());
                    let name = tr!(r, get_string(&mut r));
                    let desc = match tr!(r, r.byte()) {
                        0 => None,
                        _ => Some(tr!(r, get_string(&mut r))),
                    };
                    let why = tr!(r, get_string(&mut r));
                    let unreadable = if why.is_empty() { None } else { Some(why) };
                    let def = UserDef {
                        id,
                        name,
                        desc,
                        unreadable,
                    };
                    schemas.insert(id, user_schema(&def));
                    out.user(def);
                }
                _ => return Err(err(&r, &format!("unknown definition {op:#x}"))),
            }
            continue;
        }
        let key = if op & OP_SAME_KIND != 0 {
            last.ok_or_else(|| err(&r, "event refers to a previous kind but is the first"))?
        } else {
            let kind = tr!(r, r.u64()) as u16;
            let user = (kind == kinds::GASPARD_USER).then(|| r.u64()).transpose();
            (kind, tr!(r, user))
        };
        let site = if op & OP_SAME_SITE != 0 {
            last_site
        } else {
            tr!(r, r.u64()) as u32
        };
        let ts = last_ts.wrapping_add(tr!(r, r.u64_any()));
        let words = prev.get(key.0, key.1);
        let same = op & OP_SAME_ARGS != 0;
        let wanted = key.1.is_some() || out.wants_args(key.0);
        let n = if same {
            0
        } else if op & OP_SAME_NARGS != 0 {
            words.len()
        } else {
            tr!(r, r.u64()) as usize
        };
        if n > crate::raw::MAX_ARG_WORDS {
            return Err(err(&r, "too many arguments"));
        }
        if !wanted {
            // Only how many words there are is kept.
            if !same {
                tr!(r, r.skip_values(n));
                if words.len() != n {
                    words.resize(n, 0);
                }
            }
        } else if !same && key.1.is_none() {
            // A system kind's words are remembered whole: each is
            // decoded against the previous one of the kind in place.
            if words.len() != n {
                words.resize(n, 0);
            }
            tr!(r, r.add_i64s(words));
        } else if !same {
            scratch.clear();
            let schema: &[VaType] = match key.1 {
                Some(u) => schemas.get(&u).map_or(&[], |v| v.as_slice()),
                None => &[],
            };
            let mut classes = WordClasses::new(schema);
            // Without a schema (system events) no word is a float:
            // the same decoding, without asking word by word.
            let n = if schema.is_empty() {
                for i in 0..n {
                    let before = words.get(i).copied().unwrap_or(0);
                    scratch.push(before.wrapping_add(tr!(r, r.i64()) as u64));
                }
                0
            } else {
                n
            };
            for i in 0..n {
                let before = words.get(i).copied().unwrap_or(0);
                let v = if classes.next_is_float() {
                    before ^ tr!(r, get_xor(&mut r))
                } else {
                    before.wrapping_add(tr!(r, r.i64()) as u64)
                };
                scratch.push(v);
                classes.feed(v);
            }
            remember(words, &scratch, key.1.is_some());
        }
        let mut flags = 0;
        if op & OP_RESOLVED != 0 {
            flags |= FLAG_PTS_RESOLVED;
        }
        if op & OP_UNREAD != 0 {
            flags |= FLAG_ARGS_UNREAD;
        }
        let e = Event {
            ts,
            kind: key.0,
            phase: op & 3,
            flags,
            callsite: site,
            args_start: 0,
            nargs: 0,
        };
        let args: &[u64] = if !wanted {
            &[]
        } else if same || key.1.is_none() {
            words
        } else {
            &scratch
        };
        if same && wanted && key.1.is_none() {
            out.event_same_args(e, args);
        } else {
            out.event(e, key.1, args);
        }
        last = Some(key);
        last_site = site;
        last_ts = ts;
    }
    Ok(())
}

fn get_string(r: &mut Reader<'_>) -> Result<String, varint::Truncated> {
    let n = r.u64()? as usize;
    Ok(String::from_utf8_lossy(r.bytes(n)?).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{PHASE_END, PHASE_START};

    struct Fake;
    impl Resolver for Fake {
        fn string_at(&mut self, ptr: u64) -> Vec<u8> {
            format!("str{ptr}").into_bytes()
        }
        fn user_event(&mut self, id: u64) -> Option<UserDef> {
            Some(UserDef {
                id,
                name: format!("ev{id}"),
                desc: Some("%d".into()),
                unreadable: None,
            })
        }
    }

    fn rec(ts: u64, kind: u16, phase: u8, file: u64, line: u32, args: &[u64]) -> Vec<u64> {
        RawHeader {
            ts,
            kind,
            phase,
            flags: 0,
            nwords: args.len() as u8,
            line,
            col: 3,
            file,
        }
        .record(args)
    }

    #[test]
    fn round_trip() {
        let mut raw = Vec::new();
        raw.extend(rec(
            1000,
            kinds::UPC_GET,
            PHASE_START,
            77,
            10,
            &[1, 0x7000, 5, 0, 8],
        ));
        raw.extend(rec(
            1040,
            kinds::UPC_GET,
            PHASE_END,
            77,
            10,
            &[1, 0x7000, 5, 0, 8],
        ));
        raw.extend(rec(
            1030,
            kinds::UPC_GET,
            PHASE_START,
            77,
            11,
            &[0, 0x7008, 5, 8, 8],
        ));
        raw.extend(rec(2000, kinds::C_FUNC, PHASE_START, 0, 0, &[99]));
        raw.extend(rec(
            2001,
            kinds::GASPARD_USER,
            crate::raw::PHASE_ATOMIC,
            0,
            0,
            &[1000, u64::MAX],
        ));
        let mut enc = Encoder::new();
        let mut at = 0;
        while at < raw.len() {
            at += enc.push(&raw[at..], &mut Fake).unwrap();
        }
        let (bytes, h) = enc.finish(ChunkHeader::default());
        assert_eq!(h.events, 5);
        let payload = &bytes[crate::chunk::CHUNK_HEADER_LEN..];
        assert!(ChunkHeader::verify(&bytes, payload));
        let mut d = DecodedChunk::default();
        decode(&h, payload, &mut d).unwrap();
        assert_eq!(d.events.len(), 5);
        let e = d.events[1];
        assert_eq!((e.ts, e.kind, e.phase), (1040, kinds::UPC_GET, PHASE_END));
        assert_eq!(d.args_of(&e), &[1, 0x7000, 5, 0, 8]);
        assert_eq!(d.events[2].ts, 1030, "time going backwards survives");
        assert_eq!(d.args_of(&d.events[2]), &[0, 0x7008, 5, 8, 8]);
        let site = d.callsites[&d.events[2].callsite];
        assert_eq!(
            (d.string(site.file), site.line, site.col),
            (Some("str77"), 11, 3)
        );
        assert_eq!(d.callsites[&d.events[3].callsite].file, 0, "no file name");
        let f = d.args_of(&d.events[3])[0] as u32;
        assert_eq!(d.string(f), Some("str99"));
        assert_eq!(d.args_of(&d.events[4]), &[1000, u64::MAX]);
        assert_eq!(d.users[&1000].name, "ev1000");
    }

    /// A sink that wants the words of one kind only.
    #[derive(Default)]
    struct Skim {
        only: u16,
        events: Vec<(Event, Option<u64>, Vec<u64>)>,
    }
    impl Sink for Skim {
        fn string(&mut self, _: u32, _: String) {}
        fn callsite(&mut self, _: u32, _: Callsite) {}
        fn user(&mut self, _: UserDef) {}
        fn event(&mut self, e: Event, user: Option<u64>, args: &[u64]) {
            self.events.push((e, user, args.to_vec()));
        }
        fn wants_args(&mut self, kind: u16) -> bool {
            kind == self.only
        }
    }

    #[test]
    fn skipped_arguments_leave_the_rest_decoded() {
        let mut raw = Vec::new();
        for i in 0..50u64 {
            // Repeated, same-length and new argument words, and a kind
            // whose words are wanted among them.
            let get = [i % 3, 0x7000 + 8 * (i % 5), 5, i * 1000, 8];
            raw.extend(rec(
                1000 + 10 * i,
                kinds::UPC_GET,
                PHASE_START,
                77,
                10,
                &get,
            ));
            raw.extend(rec(1003 + 10 * i, kinds::UPC_GET, PHASE_END, 77, 10, &get));
            if i % 7 == 0 {
                raw.extend(rec(
                    1004 + 10 * i,
                    kinds::UPC_PUT,
                    PHASE_START,
                    77,
                    12,
                    &[i, 1, 2],
                ));
            }
            raw.extend(rec(
                1005 + 10 * i,
                kinds::GASPARD_USER,
                crate::raw::PHASE_ATOMIC,
                0,
                0,
                &[1000, i * i],
            ));
        }
        let mut enc = Encoder::new();
        let mut at = 0;
        while at < raw.len() {
            at += enc.push(&raw[at..], &mut Fake).unwrap();
        }
        let (bytes, h) = enc.finish(ChunkHeader::default());
        let payload = &bytes[crate::chunk::CHUNK_HEADER_LEN..];
        let mut d = DecodedChunk::default();
        decode(&h, payload, &mut d).unwrap();
        let mut skim = Skim {
            only: kinds::UPC_PUT,
            ..Default::default()
        };
        decode_into(&h, payload, &mut skim).unwrap();
        assert_eq!(skim.events.len(), d.events.len());
        for (full, (e, user, args)) in d.events.iter().zip(&skim.events) {
            assert_eq!(
                (full.ts, full.kind, full.phase, full.callsite),
                (e.ts, e.kind, e.phase, e.callsite)
            );
            let words = d.args_of(full);
            match user {
                // User events come with their words (the id apart).
                Some(id) => assert_eq!((&[*id][..], &args[..]), words.split_at(1)),
                None if e.kind == kinds::UPC_PUT => assert_eq!(&args[..], words),
                None => assert!(args.is_empty()),
            }
        }
        // Cut short: an error, not a panic.
        let mut skim = Skim::default();
        assert!(decode_into(&h, &payload[..payload.len() - 2], &mut skim).is_err());
    }

    #[test]
    fn repeated_pairs_are_small() {
        let mut enc = Encoder::new();
        for i in 0..1000u64 {
            let phase = (i & 1) as u8;
            enc.push(
                &rec(
                    5000 + i * 30,
                    kinds::UPC_GET,
                    phase,
                    77,
                    10,
                    &[1, 0x7000, 5, 0, 8],
                ),
                &mut Fake,
            )
            .unwrap();
        }
        assert!(enc.len() <= 2 * 1000 + 64, "{} bytes", enc.len());
    }

    struct Typed(&'static str);
    impl Resolver for Typed {
        fn string_at(&mut self, _ptr: u64) -> Vec<u8> {
            b"f.c".to_vec()
        }
        fn user_event(&mut self, id: u64) -> Option<UserDef> {
            Some(UserDef {
                id,
                name: "iter".into(),
                desc: Some(self.0.into()),
                unreadable: None,
            })
        }
    }

    fn encode_all(recs: &[Vec<u64>], res: &mut dyn Resolver) -> (DecodedChunk, usize) {
        let mut enc = Encoder::new();
        for r in recs {
            enc.push(r, res).unwrap();
        }
        let n = enc.len();
        let (bytes, h) = enc.finish(ChunkHeader::default());
        let mut d = DecodedChunk::default();
        decode(&h, &bytes[crate::chunk::CHUNK_HEADER_LEN..], &mut d).unwrap();
        (d, n)
    }

    #[test]
    fn typed_user_arguments_round_trip_and_stay_small() {
        let mut recs = Vec::new();
        let mut want = Vec::new();
        for i in 0..1000u64 {
            let x = (i as f64 * 0.5).to_bits();
            for phase in [PHASE_START, PHASE_END] {
                let args = vec![70_000, i, x];
                recs.push(rec(
                    10_000 + i * 60 + u64::from(phase) * 30,
                    kinds::GASPARD_USER,
                    phase,
                    5,
                    9,
                    &args,
                ));
                want.push(args);
            }
        }
        let (d, bytes) = encode_all(&recs, &mut Typed("%d %f"));
        let got: Vec<Vec<u64>> = d.events.iter().map(|e| d.args_of(e).to_vec()).collect();
        assert_eq!(got, want);
        assert!(
            bytes as f64 / 2000.0 <= 4.0,
            "{} bytes per event",
            bytes as f64 / 2000.0
        );
    }

    #[test]
    fn strings_and_doubles_mix() {
        // "%s %f": a string's words are integers, the double after it is a double.
        let word = |s: &str| {
            let mut b = [0u8; 8];
            b[..s.len()].copy_from_slice(s.as_bytes());
            u64::from_le_bytes(b)
        };
        let recs: Vec<Vec<u64>> = [("ab", 1.5f64), ("abcdefgh", -2.25), ("", 1e300)]
            .iter()
            .map(|(s, f)| {
                let mut a = vec![70_001, s.len() as u64];
                if !s.is_empty() {
                    a.push(word(s));
                }
                a.push(f.to_bits());
                rec(1, kinds::GASPARD_USER, crate::raw::PHASE_ATOMIC, 0, 0, &a)
            })
            .collect();
        let (d, _) = encode_all(&recs, &mut Typed("%s %f"));
        for (e, r) in d.events.iter().zip(&recs) {
            assert_eq!(d.args_of(e), &r[3..]);
        }
        let schema = user::parse_format("%s %f").unwrap();
        let v = user::decode_values(&schema.args, &d.args_of(&d.events[1])[1..]).unwrap();
        assert_eq!(
            v,
            vec![
                user::Value::Str("abcdefgh".into()),
                user::Value::Float(-2.25)
            ]
        );
    }

    #[test]
    fn xor_coding_round_trips() {
        for x in [0u64, 1, 0xff00, 1 << 63, u64::MAX, 0x0000_ff00_0000_0000] {
            let mut p = Vec::new();
            put_xor(&mut p, x);
            assert_eq!(get_xor(&mut Reader::new(&p)).unwrap(), x);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut d = DecodedChunk::default();
        for junk in [
            &[0x07u8][..],
            &[0x00, 0x80],
            &[0xff, 0xff, 0xff],
            &[0x04, 1, 1],
        ] {
            assert!(decode(&ChunkHeader::default(), junk, &mut d).is_err());
        }
    }
}
