//! Python-compatible text forms of template values: `json.dumps` (HF's `tojson` filter) and
//! `repr` (what Jinja2 prints for a list or dict). Chat templates are written against Python
//! Jinja2, so these must match it byte for byte.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// Options of Python's `json.dumps` that HF's `tojson` filter forwards.
pub struct JsonOptions {
    pub ensure_ascii: bool,
    /// None: single line; Some(s): newline and `s` repeated per nesting level.
    pub indent: Option<String>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
}

/// Python `repr(float)`: shortest round-trip digits, exponent form outside [1e-4, 1e16).
pub fn float_repr(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    // `{:e}` yields the shortest round-trip digits as "d.ddde[-]x".
    let sci = format!("{:e}", v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if (point as usize) >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let mant = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{esign}{:02}", exp.abs())
    }
}

fn json_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn number_text(v: &Value) -> Result<String, Error> {
    if v.is_integer() {
        return Ok(v.to_string());
    }
    let f = f64::try_from(v.clone())?;
    Ok(float_repr(f))
}

fn newline_indent(opts: &JsonOptions, depth: usize, out: &mut String) {
    if let Some(indent) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

/// Python `json.dumps(value, ...)` over a template value.
pub fn to_json(v: &Value, opts: &JsonOptions, depth: usize, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if !v.is_integer() {
                let f = f64::try_from(v.clone())?;
                if f.is_nan() {
                    out.push_str("NaN");
                    return Ok(());
                } else if f.is_infinite() {
                    out.push_str(if f < 0.0 { "-Infinity" } else { "Infinity" });
                    return Ok(());
                }
            }
            out.push_str(&number_text(v)?)
        }
        ValueKind::String => json_string(v.as_str().unwrap_or_default(), opts.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_separator);
                }
                newline_indent(opts, depth + 1, out);
                to_json(item, opts, depth + 1, out)?;
            }
            newline_indent(opts, depth, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if opts.sort_keys {
                keys.sort_by(|a, b| a.to_string().cmp(&b.to_string()));
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&opts.item_separator);
                }
                newline_indent(opts, depth + 1, out);
                let key_text =
                    match key.kind() {
                        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
                        ValueKind::Number => number_text(key)?,
                        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).into(),
                        ValueKind::None => "null".into(),
                        kind => return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            format!(
                                "tojson: keys must be str, int, float, bool or None, not {kind}"
                            ),
                        )),
                    };
                json_string(&key_text, opts.ensure_ascii, out);
                out.push_str(&opts.key_separator);
                to_json(&v.get_item(key)?, opts, depth + 1, out)?;
            }
            newline_indent(opts, depth, out);
            out.push('}');
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: object of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

fn repr_string(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (c as u32) == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python `repr(value)` for the value kinds JSON can produce.
pub fn py_repr(v: &Value, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::String => repr_string(v.as_str().unwrap_or_default(), out),
        ValueKind::Number => out.push_str(&number_text(v)?),
        ValueKind::Seq => {
            out.push('[');
            for (i, item) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&item, out)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in v.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&key, out)?;
                out.push_str(": ");
                py_repr(&v.get_item(&key)?, out)?;
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
    Ok(())
}
