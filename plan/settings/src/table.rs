//! Settings written as a table (a sweep plan's `[settings]`) are a command line written another
//! way: [`parse`] turns the table into the flags it stands for and parses them with the same
//! `clap::Args` the command line uses — one set of names, defaults, value parsers, ranges and
//! `requires` — and [`to_argv`] turns typed settings back into those flags (for a harness command
//! line) through their `Serialize` form. A key is a field name (`profile_runs`, `ep_options`); a
//! nested table is a section of its own (`[settings.qnn]`) holding that struct's fields only.
//!
//! Values: a string or number is the flag's value, `true` a switch (`false` leaves it off), a list
//! the repeated flag (`shapes = ["x=1x3", "y=1x4"]`).

use std::fmt;

use clap::{ArgAction, Args, Command, FromArgMatches};
use serde::Serialize;
use serde_json::{Map, Value};

/// A setting that cannot be taken: the field (`runs`, `qnn.vtcm_mb`) and why, with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field as written in the table, a section's fields as `section.field`.
    pub field: String,
    /// What is wrong, in the table's terms (field names, not flags).
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// One settable field: its key, its section (if nested), its flag and how the flag takes values.
struct Field {
    key: String,
    section: Option<String>,
    long: String,
    action: ArgAction,
    /// The values it takes by name (an EP, a log level), empty for free values.
    values: Vec<String>,
}

impl Field {
    /// `qnn.vtcm_mb` or `runs`.
    fn path(&self) -> String {
        match &self.section {
            Some(section) => format!("{section}.{}", self.key),
            None => self.key.clone(),
        }
    }

    /// The flags one value of this field stands for.
    fn flags(&self, value: &Value) -> Result<Vec<String>, String> {
        let one = |value: &Value| match value {
            Value::String(text) => Ok(format!("--{}={text}", self.long)),
            Value::Number(number) => Ok(format!("--{}={number}", self.long)),
            Value::Bool(on) => Ok(format!("--{}={on}", self.long)),
            other => Err(format!("takes a string or a number, not {other}")),
        };
        match (value, &self.action) {
            (Value::Null, _) => Ok(Vec::new()),
            (Value::Bool(on), ArgAction::SetTrue) => {
                Ok(if *on { vec![format!("--{}", self.long)] } else { Vec::new() })
            }
            (_, ArgAction::SetTrue) => Err("is a switch: write true or false".into()),
            (Value::Array(values), ArgAction::Append) => values.iter().map(one).collect(),
            (Value::Array(_), _) => Err("takes one value, not a list".into()),
            (value, _) => Ok(vec![one(value)?]),
        }
    }
}

/// The fields of `A`: every argument, keyed by its field name, in the section its `Serialize` form
/// nests it in (read from the defaults' form, where every field is present).
fn fields<A: Args + Serialize + Default>() -> Vec<Field> {
    let command = A::augment_args(Command::new("settings"));
    let shape = match serde_json::to_value(A::default()) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let section_of = |key: &str| {
        shape.iter().find_map(|(section, value)| match value {
            Value::Object(inner) if inner.contains_key(key) => Some(section.clone()),
            _ => None,
        })
    };
    command
        .get_arguments()
        .filter_map(|arg| {
            let key = arg.get_id().as_str().to_string();
            Some(Field {
                section: section_of(&key),
                long: arg.get_long()?.to_string(),
                action: arg.get_action().clone(),
                values: arg.get_possible_values().iter().map(|v| v.get_name().to_string()).collect(),
                key,
            })
        })
        .collect()
}

/// The command line `table` stands for, or the first field that cannot be a flag.
fn table_argv(fields: &[Field], table: &Map<String, Value>) -> Result<Vec<String>, FieldError> {
    let mut argv = Vec::new();
    let sections: Vec<&str> = fields.iter().filter_map(|f| f.section.as_deref()).collect();
    for (key, value) in table {
        match value {
            Value::Object(inner) if sections.contains(&key.as_str()) => {
                for (inner_key, inner_value) in inner {
                    let field = find(fields, Some(key), inner_key)?;
                    argv.extend(field.flags(inner_value).map_err(|m| error(field.path(), m))?);
                }
            }
            value => {
                let field = find(fields, None, key)?;
                argv.extend(field.flags(value).map_err(|m| error(field.path(), m))?);
            }
        }
    }
    Ok(argv)
}

/// The field `key` of `section`, or an error naming the closest field (or the section it belongs in).
fn find<'a>(fields: &'a [Field], section: Option<&str>, key: &str) -> Result<&'a Field, FieldError> {
    let path = |key: &str| section.map_or(key.to_string(), |s| format!("{s}.{key}"));
    if let Some(field) = fields.iter().find(|f| f.key == key && f.section.as_deref() == section) {
        return Ok(field);
    }
    if let Some(elsewhere) = fields.iter().find(|f| f.key == key) {
        let place =
            elsewhere.section.as_deref().map_or("the [settings] table itself".into(), |s| format!("[settings.{s}]"));
        return Err(error(path(key), format!("belongs in {place}")));
    }
    let known: Vec<String> = fields.iter().map(Field::path).collect();
    let near = npugate_result::names::closest(&path(key), known.iter().map(String::as_str));
    let hint = near.map(|near| format!("; did you mean `{near}`?")).unwrap_or_default();
    Err(error(
        path(key),
        format!(
            "unknown setting{hint} (`npugate run --help` lists the settings; a field is the flag's name with _ for -)"
        ),
    ))
}

fn error(field: String, message: impl Into<String>) -> FieldError {
    FieldError { field, message: message.into() }
}

/// `A` from a table (any `Serialize` map: a TOML table, JSON), parsed by `A`'s own command-line
/// parser so that every check of the flags applies; the error names the field in the table's terms.
pub fn parse<A: Args + FromArgMatches + Serialize + Default>(table: &impl Serialize) -> Result<A, FieldError> {
    let fields = fields::<A>();
    let table = match serde_json::to_value(table) {
        Ok(Value::Object(map)) => map,
        Ok(Value::Null) => Map::new(),
        _ => return Err(error("settings".into(), "must be a table of settings")),
    };
    let argv = table_argv(&fields, &table)?;
    let matches = command::<A>().try_get_matches_from(&argv).map_err(|e| clap_error::<A>(&fields, &table, &e))?;
    A::from_arg_matches(&matches).map_err(|e| clap_error::<A>(&fields, &table, &e))
}

/// `A`'s parser for flags alone (no program name).
fn command<A: Args>() -> Command {
    A::augment_args(Command::new("settings").no_binary_name(true))
}

/// A clap error about flags as an error about fields: the field it names, its message in field names.
fn clap_error<A: Args>(fields: &[Field], table: &Map<String, Value>, clap: &clap::Error) -> FieldError {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let named = |context: Option<&ContextValue>| match context {
        Some(ContextValue::String(flag)) => Some(flag.clone()),
        Some(ContextValue::Strings(flags)) => flags.first().cloned(),
        _ => None,
    };
    let flag = named(clap.get(ContextKind::InvalidArg)).unwrap_or_default();
    let field = fields.iter().find(|f| flag.trim_start_matches("--").split([' ', '=']).next() == Some(f.long.as_str()));
    if clap.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(missing) = field {
            return requirement::<A>(fields, table, missing);
        }
    }
    let message = plain(&clap.render().to_string());
    error(field.map_or("settings".into(), Field::path), in_field_names(fields, &message))
}

/// The field that needs `missing` (found by parsing each given field alone) and what to add.
fn requirement<A: Args>(fields: &[Field], table: &Map<String, Value>, missing: &Field) -> FieldError {
    let needs = match missing.action {
        ArgAction::SetTrue => format!("{} = true", missing.path()),
        _ => missing.path(),
    };
    for (key, value) in table {
        let alone: Map<String, Value> = std::iter::once((key.clone(), value.clone())).collect();
        let argv = table_argv(fields, &alone).unwrap_or_default();
        let refused = command::<A>().try_get_matches_from(&argv);
        if refused.is_err_and(|e| e.kind() == clap::error::ErrorKind::MissingRequiredArgument) {
            return error(key.clone(), format!("needs {needs} as well; add it, or drop {key}"));
        }
    }
    error(missing.path(), format!("is required by the settings given; add {needs}"))
}

/// clap's rendered error as one line: its sentences without the usage and help pointers.
fn plain(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .map(|line| line.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `message` with every `--flag <VALUE>` written as its field name, and `--flag value` as
/// `field = "value"` where the value is one of the field's named values.
fn in_field_names(fields: &[Field], message: &str) -> String {
    let mut text = message.to_string();
    let mut by_length: Vec<&Field> = fields.iter().collect();
    by_length.sort_by_key(|f| std::cmp::Reverse(f.long.len()));
    for field in by_length {
        let flag = format!("--{}", field.long);
        while let Some(at) = text.find(&flag) {
            let mut end = at + flag.len();
            let rest = &text[end..];
            let word: String =
                rest.chars().skip(1).take_while(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c)).collect();
            let replacement = if rest.starts_with(" <") {
                end += rest.find('>').map_or(0, |close| close + 1);
                field.path()
            } else if rest.starts_with(' ') && field.values.contains(&word) {
                end += 1 + word.len();
                format!("{} = {word:?}", field.path())
            } else {
                field.path()
            };
            text.replace_range(at..end, &replacement);
        }
    }
    text
}

/// The flags that reproduce `settings` on a command line of `A` (unset options and switches that
/// are off left out, lists as repeated flags).
pub fn to_argv<A: Args + Serialize + Default>(settings: &A) -> Vec<String> {
    let fields = fields::<A>();
    let table = match serde_json::to_value(settings) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    table_argv(&fields, &table).unwrap_or_else(|e| unreachable!("typed settings are always flags: {e}"))
}

/// The flags of `settings` that were given (not unset), by name: `--vtcm-mb`, …
pub fn given_flags<A: Args + Serialize + Default>(settings: &A) -> Vec<String> {
    to_argv(settings).into_iter().map(|flag| flag.split('=').next().unwrap_or_default().to_string()).collect()
}

/// `message` about flags in a table's terms, for `A`'s fields (e.g. a [`crate::HarnessSettings::check`]
/// refusal shown for a sweep plan).
pub fn message_in_field_names<A: Args + Serialize + Default>(message: &str) -> String {
    in_field_names(&fields::<A>(), message)
}
