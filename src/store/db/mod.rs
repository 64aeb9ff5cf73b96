//! One SQL API over the two databases Cairn can keep its truth in: SQLite (rusqlite,
//! the embedded default) and PostgreSQL (tokio-postgres, shared by many hosts).
//!
//! Domain code writes SQL once, with numbered placeholders (`?1`, `?2`, …) and the
//! portable subset both dialects share (`ON CONFLICT … DO …`, `RETURNING`, `coalesce`),
//! binds values through [`ToSql`] and reads columns through [`FromSql`]. Where the
//! dialects differ (text search, JSON access, time functions), it asks
//! [`Conn::dialect`] and writes each form. A [`Conn`] is what [`crate::store::Store`]
//! hands to a read or a write transaction; nothing outside this module names rusqlite
//! or tokio-postgres.
//!
//! Rows are read into owned [`Value`]s: a row is small, and one representation for both
//! backends keeps conversions in one place.

mod pg;
mod sqlite;

use std::sync::Arc;

use crate::error::{Error, Result};

pub(crate) use pg::{CHANGES_CHANNEL, PgConn, PgConnector, PgListener, redact};

/// Which SQL dialect a [`Conn`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The SQL that differs between the dialects, as fragments to splice into a statement.
impl Dialect {
    /// The text at top-level key `key` of the JSON text in column `col`.
    pub(crate) fn json_text(self, col: &str, key: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_extract({col}, '$.{key}')"),
            Dialect::Postgres => format!("(CAST({col} AS jsonb) ->> '{key}')"),
        }
    }

    /// A subquery of the elements of the JSON array bound at `param` (text elements,
    /// or integers when `integers`), for `x IN (…)`.
    pub(crate) fn json_elements(self, param: &str, integers: bool) -> String {
        match (self, integers) {
            (Dialect::Sqlite, _) => format!("SELECT value FROM json_each({param})"),
            (Dialect::Postgres, false) => {
                format!("SELECT value FROM jsonb_array_elements_text(CAST({param} AS jsonb))")
            }
            (Dialect::Postgres, true) => format!(
                "SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST({param} AS jsonb))"
            ),
        }
    }

    /// Seconds since the Unix epoch, with fractions, of the RFC 3339 text in `col`.
    pub(crate) fn epoch_seconds(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => format!("unixepoch({col}, 'subsec')"),
            Dialect::Postgres => format!("extract(epoch FROM CAST({col} AS timestamptz))"),
        }
    }

    /// An `ORDER BY` list for rows read loosely in `col` order (a chain being
    /// verified): SQLite columns take any type, so a tampered row may hold text there and
    /// goes last; PostgreSQL's columns hold only their type.
    pub(crate) fn loose_order(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => format!("typeof({col}) <> 'integer', {col}"),
            Dialect::Postgres => col.to_owned(),
        }
    }
}

/// A value bound to, or read from, a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Integer(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }
}

/// A Rust value that can be bound to a placeholder.
pub trait ToSql {
    fn to_value(&self) -> Result<Value>;
}

/// A Rust value that can be read from a column.
pub trait FromSql: Sized {
    fn from_value(v: &Value) -> Result<Self>;
}

fn mismatch<T>(want: &str, got: &Value) -> Result<T> {
    Err(Error::Internal(format!(
        "database column: expected {want}, found {}",
        got.type_name()
    )))
}

macro_rules! int_sql {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_value(&self) -> Result<Value> {
                i64::try_from(*self).map(Value::Integer).map_err(|_| {
                    Error::Internal(format!("integer {} does not fit a database integer", self))
                })
            }
        }
        impl FromSql for $t {
            fn from_value(v: &Value) -> Result<Self> {
                match v {
                    Value::Integer(i) => <$t>::try_from(*i).map_err(|_| {
                        Error::Internal(format!(
                            "database integer {i} is out of range for {}",
                            stringify!($t)
                        ))
                    }),
                    other => mismatch("an integer", other),
                }
            }
        }
    )*};
}
int_sql!(i64, i32, i16, u8, u16, u32, u64, usize);

impl ToSql for bool {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Integer(i64::from(*self)))
    }
}
impl FromSql for bool {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Integer(i) => Ok(*i != 0),
            other => mismatch("an integer", other),
        }
    }
}

impl ToSql for f64 {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Real(*self))
    }
}
impl ToSql for f32 {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Real(f64::from(*self)))
    }
}
impl FromSql for f64 {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Real(r) => Ok(*r),
            Value::Integer(i) => Ok(*i as f64),
            other => mismatch("a number", other),
        }
    }
}
impl FromSql for f32 {
    fn from_value(v: &Value) -> Result<Self> {
        f64::from_value(v).map(|r| r as f32)
    }
}

impl ToSql for str {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Text(self.to_owned()))
    }
}
impl ToSql for String {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Text(self.clone()))
    }
}
impl FromSql for String {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => mismatch("text", other),
        }
    }
}

impl ToSql for [u8] {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Blob(self.to_vec()))
    }
}
impl ToSql for Vec<u8> {
    fn to_value(&self) -> Result<Value> {
        Ok(Value::Blob(self.clone()))
    }
}
impl FromSql for Vec<u8> {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            other => mismatch("a blob", other),
        }
    }
}

impl ToSql for Value {
    fn to_value(&self) -> Result<Value> {
        Ok(self.clone())
    }
}
impl FromSql for Value {
    fn from_value(v: &Value) -> Result<Self> {
        Ok(v.clone())
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_value(&self) -> Result<Value> {
        match self {
            Some(v) => v.to_value(),
            None => Ok(Value::Null),
        }
    }
}
impl<T: FromSql> FromSql for Option<T> {
    fn from_value(v: &Value) -> Result<Self> {
        match v {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_value(&self) -> Result<Value> {
        (**self).to_value()
    }
}

/// The values bound to a statement's placeholders `?1`, `?2`, … in order.
pub trait Params {
    fn values(&self) -> Result<Vec<Value>>;
}

impl Params for [&dyn ToSql; 0] {
    fn values(&self) -> Result<Vec<Value>> {
        Ok(Vec::new())
    }
}
impl<T: ToSql + ?Sized, const N: usize> Params for &[&T; N] {
    fn values(&self) -> Result<Vec<Value>> {
        self.iter().map(|v| v.to_value()).collect()
    }
}
macro_rules! array_params {
    ($($n:literal)*) => {$(
        impl<T: ToSql> Params for [T; $n] {
            fn values(&self) -> Result<Vec<Value>> {
                self.iter().map(|v| v.to_value()).collect()
            }
        }
    )*};
}
array_params!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
impl Params for &[&dyn ToSql] {
    fn values(&self) -> Result<Vec<Value>> {
        self.iter().map(|v| v.to_value()).collect()
    }
}
impl Params for Vec<Value> {
    fn values(&self) -> Result<Vec<Value>> {
        Ok(self.clone())
    }
}

/// Bind a list of values: `params![a, b, c]`.
#[macro_export]
macro_rules! params {
    () => { [] as [&dyn $crate::store::db::ToSql; 0] };
    ($($v:expr),+ $(,)?) => { &[$(&$v as &dyn $crate::store::db::ToSql),+] as &[&dyn $crate::store::db::ToSql] };
}
pub(crate) use crate::params;

/// One row of a result.
#[derive(Debug, Clone)]
pub struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

/// A column of a [`Row`]: its position or its name.
pub trait RowIndex {
    fn index(&self, row: &Row) -> Result<usize>;
}
impl RowIndex for usize {
    fn index(&self, row: &Row) -> Result<usize> {
        if *self < row.values.len() {
            Ok(*self)
        } else {
            Err(Error::Internal(format!(
                "column {self} out of range ({} columns)",
                row.values.len()
            )))
        }
    }
}
impl RowIndex for &str {
    fn index(&self, row: &Row) -> Result<usize> {
        row.names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(self))
            .ok_or_else(|| Error::Internal(format!("no column named {self}")))
    }
}

impl Row {
    /// Column `idx` as a `T`.
    pub fn get<I: RowIndex, T: FromSql>(&self, idx: I) -> Result<T> {
        let i = idx.index(self)?;
        T::from_value(&self.values[i]).map_err(|e| match e {
            Error::Internal(m) => Error::Internal(format!("{m} (column {})", self.names[i])),
            other => other,
        })
    }

    /// The number of columns.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// Column `idx` as it was read.
    pub(crate) fn value<I: RowIndex>(&self, idx: I) -> Result<&Value> {
        Ok(&self.values[idx.index(self)?])
    }
}

/// A connection to the database, inside or outside a transaction (see
/// [`crate::store::Store::read`] and [`crate::store::Store::write`]).
pub struct Conn<'a> {
    inner: Inner<'a>,
}

enum Inner<'a> {
    Sqlite(&'a rusqlite::Connection),
    Postgres(&'a PgConn),
}

impl<'a> Conn<'a> {
    pub(crate) fn sqlite(c: &'a rusqlite::Connection) -> Conn<'a> {
        Conn {
            inner: Inner::Sqlite(c),
        }
    }

    pub(crate) fn postgres(c: &'a PgConn) -> Conn<'a> {
        Conn {
            inner: Inner::Postgres(c),
        }
    }

    /// The dialect this connection speaks.
    pub fn dialect(&self) -> Dialect {
        match self.inner {
            Inner::Sqlite(_) => Dialect::Sqlite,
            Inner::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Run one statement that returns no rows; the number of rows it changed.
    pub fn execute<P: Params>(&self, sql: &str, params: P) -> Result<usize> {
        let values = params.values()?;
        match self.inner {
            Inner::Sqlite(c) => sqlite::execute(c, sql, &values),
            Inner::Postgres(c) => c.execute(sql, &values),
        }
    }

    /// Every row of a query, each mapped by `f`.
    pub fn query_map<T, P: Params>(
        &self,
        sql: &str,
        params: P,
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql, params, None)?.iter().map(&mut f).collect()
    }

    /// The rows of a query, at most `limit` of them (PostgreSQL reads them all).
    fn rows<P: Params>(&self, sql: &str, params: P, limit: Option<usize>) -> Result<Vec<Row>> {
        let values = params.values()?;
        match self.inner {
            Inner::Sqlite(c) => sqlite::query(c, sql, &values, limit),
            Inner::Postgres(c) => c.query(sql, &values),
        }
    }

    /// The first row of a query mapped by `f`, if there is one.
    pub(crate) fn query_opt<T, P: Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        self.rows(sql, params, Some(1))?.first().map(f).transpose()
    }

    /// The first row of a query mapped by `f`; a query that returns no row is an
    /// internal error (use [`Conn::query_opt`] where none is a valid answer).
    pub fn query_row<T, P: Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?
            .ok_or_else(|| Error::Internal(format!("query returned no row: {sql}")))
    }

    /// A statement to run with [`Statement::execute`] or [`Statement::query_map`].
    pub fn prepare<'c>(&'c self, sql: &str) -> Result<Statement<'c, 'a>> {
        Ok(Statement {
            conn: self,
            sql: sql.to_owned(),
        })
    }

    /// Run several statements with no parameters (schema changes).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match self.inner {
            Inner::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Inner::Postgres(c) => c.batch(sql),
        }
    }
}

/// A statement to run, possibly several times (`prepare`, then `execute` or
/// `query_map`); statements are cached by both backends, so this names SQL once.
pub struct Statement<'c, 'a> {
    conn: &'c Conn<'a>,
    sql: String,
}

impl Statement<'_, '_> {
    pub(crate) fn execute<P: Params>(&mut self, params: P) -> Result<usize> {
        self.conn.execute(&self.sql, params)
    }

    /// See [`Conn::query_opt`].
    pub(crate) fn query_opt<T, P: Params>(
        &mut self,
        params: P,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        self.conn.query_opt(&self.sql, params, f)
    }

    /// See [`Conn::query_row`].
    pub(crate) fn query_row<T, P: Params>(
        &mut self,
        params: P,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.conn.query_row(&self.sql, params, f)
    }

    /// The rows, to walk with [`Rows::next`].
    pub(crate) fn query<P: Params>(&mut self, params: P) -> Result<Rows> {
        let rows = self.conn.rows(&self.sql, params, None)?;
        Ok(Rows { rows, next: 0 })
    }

    /// The rows, each mapped by `f`, for `.collect::<Result<_>>()`.
    pub fn query_map<T, P: Params>(
        &mut self,
        params: P,
        f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.query(params)?.rows;
        Ok(rows.iter().map(f).collect::<Vec<_>>().into_iter())
    }
}

/// The rows of a query ([`Statement::query`]).
pub(crate) struct Rows {
    rows: Vec<Row>,
    next: usize,
}

impl Rows {
    /// The next row, if any.
    #[allow(clippy::should_implement_trait)] // rusqlite's fallible shape: `while let Some(r) = rows.next()?`
    pub(crate) fn next(&mut self) -> Result<Option<&Row>> {
        let i = self.next;
        self.next += 1;
        Ok(self.rows.get(i))
    }
}

/// Rewrite numbered `?N` placeholders to PostgreSQL's `$N`, leaving quoted text,
/// quoted identifiers and comments alone. A bare `?` takes the next number.
pub(crate) fn to_dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut next = 1usize;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = if digits.is_empty() {
                    let n = next;
                    next += 1;
                    n
                } else {
                    let n: usize = digits.parse().unwrap_or(0);
                    next = n + 1;
                    n
                };
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_quotes_and_comments() {
        assert_eq!(
            to_dollar_placeholders(
                "SELECT '?1', \"a?\" FROM t WHERE a = ?1 AND b = ?12 -- ?3\n AND c = ?"
            ),
            "SELECT '?1', \"a?\" FROM t WHERE a = $1 AND b = $12 -- ?3\n AND c = $13"
        );
    }

    #[test]
    fn values_convert_both_ways_and_refuse_mismatches() {
        assert_eq!(7u32.to_value().unwrap(), Value::Integer(7));
        assert!(u64::MAX.to_value().is_err());
        assert_eq!(u8::from_value(&Value::Integer(255)).unwrap(), 255);
        assert!(u8::from_value(&Value::Integer(256)).is_err());
        assert!(String::from_value(&Value::Integer(1)).is_err());
        assert_eq!(Option::<i64>::from_value(&Value::Null).unwrap(), None);
        assert!(i64::from_value(&Value::Null).is_err());
        assert_eq!(Some("x").to_value().unwrap(), Value::Text("x".into()));
    }
}
