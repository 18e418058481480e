//! User events: printf-style formats parsed into an argument schema, and
//! formatting of recorded values when the trace is read.

/// How one user-event argument is read from the varargs (`va_arg` type).
/// The numbers are shared with the C shim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum VaType {
    /// `int` (also `char`, `short`: promoted).
    Int = 1,
    /// `long`.
    Long = 2,
    /// `long long`.
    LongLong = 3,
    /// `size_t`.
    Size = 4,
    /// `intmax_t`.
    IntMax = 5,
    /// `ptrdiff_t`.
    PtrDiff = 6,
    /// `double` (also `float`: promoted).
    Double = 7,
    /// `long double`, stored as a `double`.
    LongDouble = 8,
    /// `char *`, copied (at most [`MAX_STR`] bytes).
    Str = 9,
    /// `void *`.
    Ptr = 10,
}

/// Longest string argument copied into the trace.
pub const MAX_STR: usize = 64;

/// Widths and precisions above this are taken as this (C would pad to
/// gigabytes; a report line would drown).
pub const MAX_FIELD: usize = 512;

/// At most this many bytes are added to a format's own text by formatting
/// its values ([`format_values`]): widths and precisions are capped at
/// [`MAX_FIELD`] and a format has at most 32 arguments.
pub const MAX_FORMATTED: usize = 32 * (2 * MAX_FIELD + 400);

impl VaType {
    /// From the schema byte.
    pub fn from_u8(b: u8) -> Option<VaType> {
        use VaType::*;
        Some(match b {
            1 => Int,
            2 => Long,
            3 => LongLong,
            4 => Size,
            5 => IntMax,
            6 => PtrDiff,
            7 => Double,
            8 => LongDouble,
            9 => Str,
            10 => Ptr,
            _ => return None,
        })
    }
}

/// One piece of a parsed format.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Text copied as is (`%%` already reduced).
    Lit(String),
    /// A conversion.
    Conv(Conv),
}

/// A conversion specification.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Conv {
    /// Flags among `-+ #0`.
    pub flags: String,
    /// Width: `None`, a number, or taken from an argument (`*`).
    pub width: Option<Count>,
    /// Precision.
    pub precision: Option<Count>,
    /// Length modifier as written.
    pub length: String,
    /// Conversion character.
    pub conv: char,
}

/// A width or precision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Count {
    /// Written in the format.
    Fixed(usize),
    /// Taken from an `int` argument.
    Arg,
}

/// A parsed format: its pieces and the varargs it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// The pieces in order.
    pub pieces: Vec<Piece>,
    /// The varargs, in order, including `*` widths.
    pub args: Vec<VaType>,
}

/// Why a format's arguments cannot be read safely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable(pub String);

/// Parses a printf-style format into its schema.
pub fn parse_format(fmt: &str) -> Result<Schema, Unreadable> {
    let mut pieces = Vec::new();
    let mut args = Vec::new();
    let mut lit = String::new();
    let mut it = fmt.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            lit.push(c);
            continue;
        }
        let mut conv = Conv::default();
        while let Some(&f) = it.peek() {
            if "-+ #0".contains(f) {
                conv.flags.push(f);
                it.next();
            } else {
                break;
            }
        }
        conv.width = count(&mut it, &mut args);
        if it.peek() == Some(&'.') {
            it.next();
            conv.precision = Some(count(&mut it, &mut args).unwrap_or(Count::Fixed(0)));
        }
        while let Some(&l) = it.peek() {
            if "hlLqjzt".contains(l) {
                conv.length.push(l);
                it.next();
            } else {
                break;
            }
        }
        let Some(cc) = it.next() else {
            return Err(Unreadable("format ends inside a conversion".into()));
        };
        conv.conv = cc;
        let va = match (cc, conv.length.as_str()) {
            ('%', "") if conv.flags.is_empty() && conv.width.is_none() => {
                lit.push('%');
                continue;
            }
            ('n', _) => return Err(Unreadable("%n writes through a pointer".into())),
            ('d' | 'i' | 'u' | 'x' | 'X' | 'o', len) => match len {
                "" | "h" | "hh" => VaType::Int,
                "l" => VaType::Long,
                "ll" | "q" => VaType::LongLong,
                "z" => VaType::Size,
                "j" => VaType::IntMax,
                "t" => VaType::PtrDiff,
                _ => return Err(Unreadable(format!("unknown length '{len}' in %{len}{cc}"))),
            },
            ('c', "") => VaType::Int,
            ('s', "") => VaType::Str,
            ('p', "") => VaType::Ptr,
            ('f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A', len) => match len {
                "" | "l" => VaType::Double,
                "L" => VaType::LongDouble,
                _ => return Err(Unreadable(format!("unknown length '{len}' in %{len}{cc}"))),
            },
            _ => {
                return Err(Unreadable(format!(
                    "unknown conversion %{}{}",
                    conv.length, cc
                )))
            }
        };
        args.push(va);
        if !lit.is_empty() {
            pieces.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        pieces.push(Piece::Conv(conv));
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    if args.len() > 32 {
        return Err(Unreadable("more than 32 arguments".into()));
    }
    Ok(Schema { pieces, args })
}

fn count(
    it: &mut std::iter::Peekable<std::str::Chars<'_>>,
    args: &mut Vec<VaType>,
) -> Option<Count> {
    if it.peek() == Some(&'*') {
        it.next();
        args.push(VaType::Int);
        return Some(Count::Arg);
    }
    let mut n: Option<usize> = None;
    while let Some(d) = it.peek().and_then(|c| c.to_digit(10)) {
        n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
        it.next();
    }
    n.map(Count::Fixed)
}

/// A decoded user-event argument value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Any integer, as the bits read (sign-extended where the C type is signed-width).
    Int(i64),
    /// A floating-point value.
    Float(f64),
    /// A copied string.
    Str(String),
    /// A pointer.
    Ptr(u64),
}

impl Value {
    /// A JSON-friendly view.
    pub fn to_plain(&self) -> String {
        match self {
            Value::Int(v) => v.to_string(),
            Value::Float(v) => v.to_string(),
            Value::Str(s) => s.clone(),
            Value::Ptr(p) => format!("{p:#x}"),
        }
    }
}

/// Splits the argument words of a user event by its schema.
pub fn decode_values(args: &[VaType], words: &[u64]) -> Option<Vec<Value>> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    for a in args {
        let w = *words.get(i)?;
        i += 1;
        out.push(match a {
            VaType::Double | VaType::LongDouble => Value::Float(f64::from_bits(w)),
            VaType::Ptr => Value::Ptr(w),
            VaType::Str => {
                let len = (w as usize).min(MAX_STR);
                let nw = len.div_ceil(8);
                let mut bytes = Vec::with_capacity(nw * 8);
                for k in 0..nw {
                    bytes.extend_from_slice(&words.get(i + k)?.to_le_bytes());
                }
                i += nw;
                bytes.truncate(len);
                Value::Str(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => Value::Int(w as i64),
        });
    }
    Some(out)
}

/// Formats values with the schema's pieces as C's printf would (the common cases).
pub fn format_values(schema: &Schema, values: &[Value]) -> String {
    let mut out = String::new();
    let mut vi = values.iter();
    for p in &schema.pieces {
        match p {
            Piece::Lit(s) => out.push_str(s),
            Piece::Conv(c) => {
                let mut width = None;
                let mut precision = None;
                if let Some(w) = c.width {
                    width = Some(match w {
                        Count::Fixed(n) => n.min(MAX_FIELD) as i64,
                        Count::Arg => match vi.next() {
                            Some(Value::Int(v)) => *v as i32 as i64,
                            _ => 0,
                        },
                    });
                }
                if let Some(pr) = c.precision {
                    precision = Some(match pr {
                        Count::Fixed(n) => n.min(MAX_FIELD) as i64,
                        Count::Arg => match vi.next() {
                            Some(Value::Int(v)) => *v as i32 as i64,
                            _ => -1,
                        },
                    });
                }
                let mut flags = c.flags.clone();
                let width = match width {
                    Some(w) if w < 0 => {
                        flags.push('-');
                        Some(w.unsigned_abs())
                    }
                    Some(w) => Some(w as u64),
                    None => None,
                }
                .map(|w| w.min(MAX_FIELD as u64) as usize);
                let precision = precision
                    .filter(|p| *p >= 0)
                    .map(|p| (p as u64).min(MAX_FIELD as u64) as usize);
                let Some(v) = vi.next() else { break };
                out.push_str(&format_one(c, &flags, width, precision, v));
            }
        }
    }
    out
}

fn narrow_signed(v: i64, length: &str) -> i64 {
    match length {
        "hh" => v as i8 as i64,
        "h" => v as i16 as i64,
        "" => v as i32 as i64,
        _ => v,
    }
}

fn narrow_unsigned(v: i64, length: &str) -> u64 {
    match length {
        "hh" => v as u8 as u64,
        "h" => v as u16 as u64,
        "" => v as u32 as u64,
        _ => v as u64,
    }
}

fn format_one(
    c: &Conv,
    flags: &str,
    width: Option<usize>,
    prec: Option<usize>,
    v: &Value,
) -> String {
    let left = flags.contains('-');
    let zero = flags.contains('0') && !left;
    let plus = flags.contains('+');
    let space = flags.contains(' ');
    let alt = flags.contains('#');
    let (sign, body, numeric) = match (c.conv, v) {
        ('d' | 'i', Value::Int(x)) => {
            let x = narrow_signed(*x, &c.length);
            let mut digits = x.unsigned_abs().to_string();
            if let Some(p) = prec {
                if digits.len() < p {
                    digits = "0".repeat(p - digits.len()) + &digits;
                }
            }
            let s = if x < 0 {
                "-"
            } else if plus {
                "+"
            } else if space {
                " "
            } else {
                ""
            };
            (s.to_string(), digits, prec.is_none())
        }
        ('u' | 'x' | 'X' | 'o', Value::Int(x)) => {
            let u = narrow_unsigned(*x, &c.length);
            let mut digits = match c.conv {
                'u' => u.to_string(),
                'x' => format!("{u:x}"),
                'X' => format!("{u:X}"),
                _ => format!("{u:o}"),
            };
            if let Some(p) = prec {
                if digits.len() < p {
                    digits = "0".repeat(p - digits.len()) + &digits;
                }
            }
            let pre = match (alt, c.conv, u) {
                (true, 'x', 1..) => "0x",
                (true, 'X', 1..) => "0X",
                (true, 'o', _) if !digits.starts_with('0') => "0",
                _ => "",
            };
            (pre.to_string(), digits, prec.is_none())
        }
        ('c', Value::Int(x)) => (String::new(), ((*x as u8) as char).to_string(), false),
        ('s', Value::Str(s)) => {
            let s: String = match prec {
                Some(p) => s.chars().take(p).collect(),
                None => s.clone(),
            };
            (String::new(), s, false)
        }
        ('p', Value::Ptr(p)) => (
            String::new(),
            if *p == 0 {
                "(nil)".to_string()
            } else {
                format!("{p:#x}")
            },
            false,
        ),
        (cc, Value::Float(f)) => {
            let f = *f;
            let s = if f.is_sign_negative() && !f.is_nan() {
                "-"
            } else if plus {
                "+"
            } else if space {
                " "
            } else {
                ""
            };
            let a = f.abs();
            let body = if a.is_nan() {
                "nan".to_string()
            } else if a.is_infinite() {
                "inf".to_string()
            } else {
                match cc.to_ascii_lowercase() {
                    'f' => format!("{:.*}", prec.unwrap_or(6), a),
                    'e' => c_exp(a, prec.unwrap_or(6)),
                    'g' => c_general(a, prec.unwrap_or(6), alt),
                    _ => format!("{a}"),
                }
            };
            let body = if cc.is_ascii_uppercase() {
                body.to_uppercase()
            } else {
                body
            };
            (s.to_string(), body, f.is_finite())
        }
        (_, other) => (String::new(), other.to_plain(), false),
    };
    let len = sign.len() + body.chars().count();
    let w = width.unwrap_or(0);
    if len >= w {
        return format!("{sign}{body}");
    }
    let pad = w - len;
    if left {
        format!("{sign}{body}{}", " ".repeat(pad))
    } else if zero && numeric {
        format!("{sign}{}{body}", "0".repeat(pad))
    } else {
        format!("{}{sign}{body}", " ".repeat(pad))
    }
}

/// `%e` of a non-negative finite value.
fn c_exp(a: f64, prec: usize) -> String {
    let s = format!("{:.*e}", prec, a);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = exp.parse().unwrap_or(0);
    format!("{mant}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// `%g` of a non-negative finite value.
fn c_general(a: f64, prec: usize, alt: bool) -> String {
    let p = if prec == 0 { 1 } else { prec };
    let exp = if a == 0.0 {
        0
    } else {
        let s = format!("{:.*e}", p - 1, a);
        s.split_once('e')
            .and_then(|(_, e)| e.parse::<i32>().ok())
            .unwrap_or(0)
    };
    let mut s = if exp < -4 || exp >= p as i32 {
        c_exp(a, p - 1)
    } else {
        format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, a)
    };
    if !alt {
        let (m, e) = match s.find('e') {
            Some(i) => (s[..i].to_string(), s[i..].to_string()),
            None => (s.clone(), String::new()),
        };
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            m
        };
        s = m + &e;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_common_conversions() {
        let s = parse_format("%d %s %f %p").unwrap();
        assert_eq!(
            s.args,
            vec![VaType::Int, VaType::Str, VaType::Double, VaType::Ptr]
        );
        let s = parse_format("x=%5.2lf %% %zu %lld %*d %Lg %hhd").unwrap();
        assert_eq!(
            s.args,
            vec![
                VaType::Double,
                VaType::Size,
                VaType::LongLong,
                VaType::Int,
                VaType::Int,
                VaType::LongDouble,
                VaType::Int
            ]
        );
    }

    #[test]
    fn refuses_what_is_unsafe() {
        assert!(parse_format("%n").is_err());
        assert!(parse_format("%d %y").is_err());
        assert!(parse_format("%ls").is_err());
        assert!(parse_format("trailing %").is_err());
    }

    #[test]
    fn formats_like_printf() {
        let s = parse_format("%d|%5s|%-4d|%05.1f|%x|%#o|%e|%g|%g|%c|%+d|%.3s").unwrap();
        let v = vec![
            Value::Int(-7),
            Value::Str("ab".into()),
            Value::Int(3),
            Value::Float(2.25),
            Value::Int(255),
            Value::Int(8),
            Value::Float(12345.678),
            Value::Float(0.0001),
            Value::Float(1e20),
            Value::Int(b'Z' as i64),
            Value::Int(5),
            Value::Str("abcdef".into()),
        ];
        assert_eq!(
            format_values(&s, &v),
            "-7|   ab|3   |002.2|ff|010|1.234568e+04|0.0001|1e+20|Z|+5|abc"
        );
    }

    #[test]
    fn strings_round_trip_through_words() {
        let s = "hello, world";
        let mut words = vec![s.len() as u64];
        for c in s.as_bytes().chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            words.push(u64::from_le_bytes(b));
        }
        words.push(42);
        let v = decode_values(&[VaType::Str, VaType::Int], &words).unwrap();
        assert_eq!(v, vec![Value::Str(s.into()), Value::Int(42)]);
    }

    #[test]
    fn huge_widths_and_precisions_are_capped() {
        // Found by the fuzzer: a width of five billion padded a report line
        // until memory ran out, a precision of a million took minutes.
        for (fmt, words) in [
            ("%0000000005084134553d", vec![1u64]),
            ("%.99999999999d|%.1000000x", vec![1, 2]),
            ("%*d|%-*s", vec![i32::MAX as u64, 1, i32::MIN as u64, 0]),
            (
                "%.*f|%.1000000g|%.1000000e",
                vec![u32::MAX as u64 >> 1, 0, 0, 0],
            ),
        ] {
            let s = parse_format(fmt).unwrap();
            let v = decode_values(&s.args, &words).unwrap();
            let out = format_values(&s, &v);
            assert!(
                out.len() <= fmt.len() + MAX_FORMATTED,
                "{fmt}: {}",
                out.len()
            );
        }
        let s = parse_format("%.3d|%5.2d|%-6d|").unwrap();
        let v = decode_values(&s.args, &[7, 7, 7]).unwrap();
        assert_eq!(format_values(&s, &v), "007|   07|7     |");
    }
}
