//! Parsing of the derive's attributes: `#[read_model(index(...))]` and
//! `#[column(...)]`.

use syn::parse::{Parse, ParseStream};
use syn::{Error, Ident, Lit, LitStr, Token};

/// The `kind = "..."` names and their `FieldType` variants.
pub(crate) const KINDS: [(&str, &str); 10] = [
    ("text", "Text"),
    ("integer", "Integer"),
    ("float", "Float"),
    ("decimal", "Decimal"),
    ("bool", "Bool"),
    ("uuid", "Uuid"),
    ("timestamp", "Timestamp"),
    ("date", "Date"),
    ("json", "Json"),
    ("bytes", "Bytes"),
];

/// One `index(...)` / `unique_index(...)`.
pub(crate) struct IndexSpec {
    pub(crate) columns: Vec<Ident>,
    pub(crate) unique: bool,
    pub(crate) name: Option<LitStr>,
    pub(crate) predicate: Option<LitStr>,
}

impl Parse for IndexSpec {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut spec = IndexSpec {
            columns: Vec::new(),
            unique: false,
            name: None,
            predicate: None,
        };
        while !input.is_empty() {
            if input.peek(Token![where]) {
                input.parse::<Token![where]>()?;
                input.parse::<Token![=]>()?;
                spec.predicate = Some(non_empty(
                    input.parse()?,
                    "the index predicate is empty; leave `where` out for an index on every row",
                )?);
            } else {
                let ident: Ident = input.parse()?;
                if ident == "name" && input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    spec.name = Some(non_empty(
                        input.parse()?,
                        "the index name is empty; leave `name` out for the generated one",
                    )?);
                } else {
                    spec.columns.push(ident);
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(spec)
    }
}

#[derive(Default)]
/// A field's `#[column(...)]`.
pub(crate) struct ColumnAttrs {
    pub(crate) rename: Option<LitStr>,
    pub(crate) sql_type: Option<LitStr>,
    pub(crate) sql_type_postgres: Option<LitStr>,
    pub(crate) sql_type_sqlite: Option<LitStr>,
    pub(crate) default: Option<Lit>,
    pub(crate) default_sql: Option<LitStr>,
    pub(crate) kind: Option<(LitStr, &'static str)>,
    pub(crate) nullable: bool,
    pub(crate) skip: bool,
}

const EMPTY_SQL_TYPE: &str =
    "the SQL type is empty; leave it out for the type derived from the field's Rust type";

/// `lit` unless its value is empty or blank: an empty name or SQL fragment
/// would compile here and fail only when the database reads the DDL
/// (PostgreSQL: "zero-length delimited identifier").
pub(crate) fn non_empty(lit: LitStr, message: &str) -> syn::Result<LitStr> {
    if lit.value().trim().is_empty() {
        Err(Error::new(lit.span(), message))
    } else {
        Ok(lit)
    }
}

/// Reads one `#[column(...)]` into `attrs`.
pub(crate) fn parse_column(attr: &syn::Attribute, attrs: &mut ColumnAttrs) -> syn::Result<()> {
    attr.parse_nested_meta(|meta| {
        let p = &meta.path;
        if p.is_ident("rename") {
            attrs.rename = Some(non_empty(
                meta.value()?.parse()?,
                "the column name is empty; leave `rename` out to use the field's name",
            )?);
        } else if p.is_ident("sql_type") {
            attrs.sql_type = Some(non_empty(meta.value()?.parse()?, EMPTY_SQL_TYPE)?);
        } else if p.is_ident("sql_type_postgres") {
            attrs.sql_type_postgres = Some(non_empty(meta.value()?.parse()?, EMPTY_SQL_TYPE)?);
        } else if p.is_ident("sql_type_sqlite") {
            attrs.sql_type_sqlite = Some(non_empty(meta.value()?.parse()?, EMPTY_SQL_TYPE)?);
        } else if p.is_ident("default") {
            let lit: Lit = meta.value()?.parse()?;
            match lit {
                Lit::Str(_) | Lit::Int(_) | Lit::Float(_) | Lit::Bool(_) => attrs.default = Some(lit),
                other => {
                    return Err(Error::new(
                        other.span(),
                        "a column default is a string, integer, float or bool literal (or use default_sql = \"...\")",
                    ))
                }
            }
        } else if p.is_ident("default_sql") {
            attrs.default_sql = Some(non_empty(
                meta.value()?.parse()?,
                "the SQL default is empty; give `default_sql` an SQL expression, or leave it out",
            )?);
        } else if p.is_ident("kind") {
            let lit: LitStr = meta.value()?.parse()?;
            let Some((_, variant)) = KINDS.iter().find(|(k, _)| *k == lit.value()) else {
                let known: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
                return Err(Error::new(
                    lit.span(),
                    format!("unknown column kind {:?}; expected one of {}", lit.value(), known.join(", ")),
                ));
            };
            attrs.kind = Some((lit, variant));
        } else if p.is_ident("nullable") {
            attrs.nullable = true;
        } else if p.is_ident("skip") {
            attrs.skip = true;
        } else {
            return Err(meta.error(
                "unknown #[column] attribute; expected rename, sql_type, sql_type_postgres, sql_type_sqlite, default, default_sql, kind, nullable or skip",
            ));
        }
        Ok(())
    })
}
