//! The Jinja environment HF `transformers` renders chat templates in, rebuilt on minijinja:
//! `trim_blocks` and `lstrip_blocks` on, loop controls, Python string/dict methods, and the
//! globals and filters HF adds (`raise_exception`, `strftime_now`, `tojson`).

use std::fmt::Write as _;

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Output, State, Value};

use crate::pyfmt::{float_repr, py_repr, to_json, JsonOptions};

/// Name under which the single template of an environment is stored (shows in error messages).
pub const TEMPLATE_NAME: &str = "chat_template";

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> Result<Value, Error> {
    let mut text = String::new();
    write!(text, "{}", chrono::Local::now().format(&format)).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: bad format {format:?}"),
        )
    })?;
    Ok(Value::from(text))
}

fn indent_option(v: &Value) -> Result<Option<String>, Error> {
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => Ok(None),
        ValueKind::Number => {
            let n = v.as_i64().ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: indent must be an integer",
                )
            })?;
            Ok(Some(" ".repeat(n.max(0) as usize)))
        }
        ValueKind::String => Ok(Some(v.as_str().unwrap_or_default().to_string())),
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: bad indent",
        )),
    }
}

/// HF's `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let arg = |index: usize, name: &str| -> Result<Value, Error> {
        if kwargs.has(name) {
            kwargs.get::<Value>(name)
        } else {
            Ok(args.0.get(index).cloned().unwrap_or(Value::UNDEFINED))
        }
    };
    let ensure_ascii = arg(0, "ensure_ascii")?.is_true();
    let indent = indent_option(&arg(1, "indent")?)?;
    let separators = arg(2, "separators")?;
    let sort_keys = arg(3, "sort_keys")?.is_true();
    kwargs.assert_all_used()?;
    let (item_separator, key_separator) = match separators.kind() {
        ValueKind::None | ValueKind::Undefined => (
            if indent.is_some() { "," } else { ", " }.to_string(),
            ": ".to_string(),
        ),
        _ => {
            let parts: Vec<Value> = separators.try_iter()?.collect();
            if parts.len() != 2 {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair",
                ));
            }
            (parts[0].to_string(), parts[1].to_string())
        }
    };
    let opts = JsonOptions {
        ensure_ascii,
        indent,
        item_separator,
        key_separator,
        sort_keys,
    };
    let mut out = String::new();
    to_json(value, &opts, 0, &mut out)?;
    Ok(Value::from(out))
}

/// Prints values the way Jinja2 does: `str(x)`, which is `repr` for lists and dicts.
fn python_formatter(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Map => {
            let mut text = String::new();
            py_repr(value, &mut text)?;
            out.write_str(&text).map_err(Error::from)
        }
        ValueKind::Number if !value.is_integer() => {
            let f = f64::try_from(value.clone())?;
            out.write_str(&float_repr(f)).map_err(Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// Builds the environment holding `source` as its only template; fails on a syntax error.
pub fn build(source: String) -> Result<Environment<'static>, Error> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(python_formatter);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", tojson);
    env.add_template_owned(TEMPLATE_NAME, source)?;
    Ok(env)
}
