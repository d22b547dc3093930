//! `#[derive(ReadModel)]` for `pgcoord` read models.
//!
//! Use it through `pgcoord` (feature `derive`, on by default):
//! `use pgcoord::readmodels::ReadModel;` brings both the trait and
//! the derive.
//!
//! ```ignore
//! #[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
//! #[read_model(table = "orders", index(status, customer), unique_index(email))]
//! struct Order {
//!     #[serde(flatten)]
//!     #[read_model(meta)]
//!     meta: ReadModelMeta,
//!     customer: String,
//!     email: String,
//!     #[column(sql_type = "VARCHAR(16)", default = "open")]
//!     status: String,
//!     #[column(kind = "decimal")]
//!     total: String,
//!     note: Option<String>,
//! }
//! ```
//!
//! What it generates:
//!
//! - `ReadModel::TABLE_NAME`: `table = "..."`, else the identifier in
//!   snake_case, pluralised (`OrderSummary` -> `order_summaries`), computed
//!   here at compile time;
//! - `fields()`, one descriptor per field other than the meta field, its
//!   type from `FieldKind` (`Option<T>` is nullable);
//! - `indexes()`, `meta()`, `meta_mut()`;
//! - `to_values()` / `from_values()` converting each field directly (no
//!   detour through `serde_json::Value`);
//! - one `Column` constant per field, named after it in upper case
//!   (`Order::STATUS`), for filters and order keys.
//!
//! Container attributes, `#[read_model(...)]`: `table = "name"`,
//! `index(a, b, ...)` and `unique_index(...)`, each optionally with
//! `name = "..."` and `where = "..."` (a PostgreSQL-only partial-index
//! predicate), and `crate = "path"`: where the `pgcoord` crate is, when it
//! is a dependency under another name (`crate = "my_pgcoord"`) or reached
//! through a re-export (`crate = "my_lib::pgcoord"`), as serde's
//! `#[serde(crate = "...")]`. Without it the generated code names
//! `::pgcoord`.
//!
//! Field attributes: `#[read_model(meta)]` on the `ReadModelMeta` field (a
//! field whose type is named `ReadModelMeta` is found without it);
//! `#[column(...)]` with `rename = "col"`, `sql_type = "..."`,
//! `sql_type_postgres = "..."`, `sql_type_sqlite = "..."`, `default = lit`
//! (a literal the column can hold: a string for text, UUID, timestamp and
//! date columns, an integer for integer columns, a number for float
//! columns, a number or string for decimals, a bool for bool columns),
//! `default_sql = "expr"`,
//! `kind = "text" | "integer" | "float" | "decimal" | "bool" | "uuid" |
//! "timestamp" | "date" | "json" | "bytes"` (for types without a
//! `FieldKind`; converted through their serde form), `nullable`, and
//! `skip` (not stored; rebuilt with `Default::default()`).
//!
//! Mistakes the database would otherwise report only when it reads the
//! DDL are compile errors: an empty (or blank) table, column or index name,
//! SQL type, SQL default or index predicate, a `default` literal the
//! column cannot hold (`default = 5` on a `String`, `default = 300` on a
//! `u8`, a date that does not exist), and a column named like a base
//! column or another column up to ASCII case (SQLite's comparison).
//!
//! A raw identifier names its column without `r#` (`r#type` is `type`).

use std::collections::HashMap;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, Ident, LitStr};

mod attrs;
mod column;
mod default_range;
mod naming;

use attrs::{parse_column, ColumnAttrs, IndexSpec};
use column::{check_default, decoder, descriptor, encoder, last_segment, Column};

/// Derives `pgcoord::readmodels::ReadModel`; see the crate docs.
#[proc_macro_derive(ReadModel, attributes(read_model, column))]
pub fn derive_read_model(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    expand(input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

const BASE_COLUMNS: [&str; 5] = ["id", "created_at", "updated_at", "version", "deleted_at"];

fn expand(input: DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(Error::new(
            name.span(),
            "#[derive(ReadModel)] works on structs with named fields only",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(Error::new(
            name.span(),
            "#[derive(ReadModel)] works on structs with named fields only",
        ));
    };

    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &input.generics,
            "generic read models are not supported: a read model is one table with fixed \
             column types; derive on a struct with concrete field types",
        ));
    }
    if let Some(attr) = input.attrs.iter().find(|a| a.path().is_ident("column")) {
        return Err(Error::new_spanned(
            attr,
            "#[column(...)] goes on a field, not on the struct; container attributes are \
             #[read_model(...)]",
        ));
    }

    let mut table: Option<LitStr> = None;
    let mut krate: Option<syn::Path> = None;
    let mut indexes: Vec<IndexSpec> = Vec::new();
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("read_model"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("table") {
                let default = naming::pluralize(&naming::snake_case(&name.to_string()));
                table = Some(attrs::non_empty(
                    meta.value()?.parse()?,
                    &format!(
                        "the table name is empty; leave `table` out for the default name, `{default}`"
                    ),
                )?);
            } else if meta.path.is_ident("crate") {
                let path: LitStr = meta.value()?.parse()?;
                krate = Some(path.parse().map_err(|_| {
                    Error::new(
                        path.span(),
                        "`crate = \"...\"` takes a path to the pgcoord crate, e.g. `crate = \"my_pgcoord\"`",
                    )
                })?);
            } else if meta.path.is_ident("index") || meta.path.is_ident("unique_index") {
                let content;
                syn::parenthesized!(content in meta.input);
                let mut spec: IndexSpec = content.parse()?;
                spec.unique = meta.path.is_ident("unique_index");
                if spec.columns.is_empty() {
                    return Err(meta.error("an index needs at least one column"));
                }
                indexes.push(spec);
            } else {
                return Err(meta.error(
                    "unknown #[read_model] attribute; expected `table = \"...\"`, `index(...)`, `unique_index(...)` or `crate = \"...\"`",
                ));
            }
            Ok(())
        })?;
    }
    let table = table
        .map(|t| t.value())
        .unwrap_or_else(|| naming::pluralize(&naming::snake_case(&name.to_string())));

    let marked_meta = |f: &&syn::Field| {
        f.attrs.iter().any(|a| {
            a.path().is_ident("read_model") && a.parse_args::<Ident>().is_ok_and(|i| i == "meta")
        })
    };
    let is_meta_type = |ty: &syn::Type| last_segment(ty).as_deref() == Some("ReadModelMeta");
    let explicit_meta = named.named.iter().any(|f| marked_meta(&f));
    // The field that will be the meta field: the marked one, else the
    // first of type `ReadModelMeta`. Any other `ReadModelMeta` is a mistake.
    let meta_candidate = named
        .named
        .iter()
        .find(marked_meta)
        .or_else(|| named.named.iter().find(|f| is_meta_type(&f.ty)))
        .and_then(|f| f.ident.clone());
    let mut meta_field: Option<(Ident, syn::Type)> = None;
    let mut columns: Vec<Column> = Vec::new();
    for field in &named.named {
        let ident = field.ident.clone().expect("named field");
        let mut is_meta = false;
        let mut attrs = ColumnAttrs::default();
        for attr in &field.attrs {
            if attr.path().is_ident("read_model") {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("meta") {
                        is_meta = true;
                        Ok(())
                    } else {
                        Err(meta.error("unknown field attribute; expected #[read_model(meta)]"))
                    }
                })?;
            } else if attr.path().is_ident("column") {
                parse_column(attr, &mut attrs)?;
            }
        }
        if !is_meta && is_meta_type(&field.ty) {
            if !explicit_meta && meta_field.is_none() {
                is_meta = true;
            } else if let Some(meta) = &meta_candidate {
                return Err(Error::new(
                    ident.span(),
                    format!("a read model has exactly one `ReadModelMeta` field; `{meta}` is it"),
                ));
            }
        }
        if is_meta {
            if let Some(attr) = field.attrs.iter().find(|a| a.path().is_ident("column")) {
                return Err(Error::new_spanned(
                    attr,
                    "#[column(...)] does not apply to the meta field: its columns are the base \
                     columns (id, created_at, updated_at, version, deleted_at), whose names are fixed",
                ));
            }
            if let Some((first, _)) = &meta_field {
                return Err(Error::new(
                    ident.span(),
                    format!("a read model has one meta field; `{first}` is already it"),
                ));
            }
            meta_field = Some((ident, field.ty.clone()));
            continue;
        }
        let name = attrs
            .rename
            .as_ref()
            .map(LitStr::value)
            // `r#type` is the column `type`, as serde names it.
            .unwrap_or_else(|| ident.unraw().to_string());
        let column = Column {
            ident,
            ty: field.ty.clone(),
            name,
            attrs,
        };
        check_default(&column)?;
        columns.push(column);
    }
    let Some((meta_field, meta_ty)) = meta_field else {
        return Err(Error::new(
            name.span(),
            "#[derive(ReadModel)] needs a `ReadModelMeta` field: add `#[serde(flatten)] #[read_model(meta)] meta: ReadModelMeta`",
        ));
    };

    // SQLite matches column names ASCII case-insensitively, so `Id` is
    // `id` there: names are compared that way for every backend.
    let mut seen: HashMap<String, (Ident, String)> = HashMap::new();
    for c in columns.iter().filter(|c| !c.attrs.skip) {
        let folded = c.name.to_ascii_lowercase();
        if let Some(base) = BASE_COLUMNS.iter().find(|b| **b == folded) {
            let what = match c.name == *base {
                true => format!("column `{base}` is a base column (ReadModelMeta carries it)"),
                false => format!(
                    "column `{}` clashes with the base column `{base}` (ReadModelMeta carries it; \
                     SQLite matches column names case-insensitively)",
                    c.name
                ),
            };
            return Err(Error::new(
                c.ident.span(),
                format!("{what}; rename the field or give it #[column(rename = \"...\")]"),
            ));
        }
        if let Some((first, name)) = seen.get(&folded) {
            let also = match *name == c.name {
                true => String::new(),
                false => format!(" as `{name}` (SQLite matches column names case-insensitively)"),
            };
            return Err(Error::new(
                c.ident.span(),
                format!(
                    "duplicate column `{}`: field `{first}` already uses it{also}",
                    c.name
                ),
            ));
        }
        seen.insert(folded, (c.ident.clone(), c.name.clone()));
    }

    let root = match &krate {
        Some(path) => quote!(#path),
        None => quote!(::pgcoord),
    };
    let rm = quote!(#root::readmodels);
    let stored: Vec<&Column> = columns.iter().filter(|c| !c.attrs.skip).collect();

    let descriptors = stored.iter().map(|c| descriptor(c, &rm));
    let encoders = stored.iter().map(|c| encoder(c, &rm));
    let decoders = columns.iter().map(|c| decoder(c, &rm));

    let mut index_tokens = Vec::new();
    for spec in &indexes {
        let mut names = Vec::new();
        for col in &spec.columns {
            let Some(c) = stored.iter().find(|c| c.ident == *col) else {
                let hint = match stored.iter().find(|c| col.unraw() == c.name) {
                    Some(c) => format!(
                        "; `{col}` is the column of field `{}`: index(...) takes Rust field \
                         names, write `{}`",
                        c.ident, c.ident
                    ),
                    None => String::new(),
                };
                return Err(Error::new(
                    col.span(),
                    format!("index on `{col}`, which is not a stored field of this model{hint}"),
                ));
            };
            names.push(c.name.clone());
        }
        let mut t = quote!(#rm::IndexDescriptor::on([#(#names),*]));
        if spec.unique {
            t = quote!(#t.unique());
        }
        if let Some(n) = &spec.name {
            t = quote!(#t.named(#n));
        }
        if let Some(p) = &spec.predicate {
            t = quote!(#t.postgres_where(#p));
        }
        index_tokens.push(t);
    }

    let consts = stored.iter().map(|c| {
        let const_name = format_ident!(
            "{}",
            c.ident.unraw().to_string().to_uppercase(),
            span = c.ident.span()
        );
        let col = &c.name;
        let doc = format!("The column `{col}`.");
        quote!(#[doc = #doc] pub const #const_name: #rm::Column = #rm::Column::new(#col);)
    });

    // A meta field of another type fails to compile here: point at its type.
    let meta_ref = quote_spanned!(meta_ty.span()=> &self.#meta_field);
    let meta_mut = quote_spanned!(meta_ty.span()=> &mut self.#meta_field);
    let meta_init = quote_spanned!(meta_ty.span()=> #meta_field: meta);

    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #rm::ReadModel for #name #ty_generics #where_clause {
            const TABLE_NAME: ::core::option::Option<&'static str> = ::core::option::Option::Some(#table);

            fn fields() -> ::std::vec::Vec<#rm::FieldDescriptor> {
                ::std::vec![#(#descriptors),*]
            }

            fn indexes() -> ::std::vec::Vec<#rm::IndexDescriptor> {
                ::std::vec![#(#index_tokens),*]
            }

            fn meta(&self) -> &#rm::ReadModelMeta {
                #meta_ref
            }

            fn meta_mut(&mut self) -> &mut #rm::ReadModelMeta {
                #meta_mut
            }

            fn to_values(
                &self,
                _fields: &[#rm::FieldDescriptor],
            ) -> ::core::result::Result<::std::vec::Vec<#rm::Value>, #root::error::ReadModelError> {
                ::core::result::Result::Ok(::std::vec![#(#encoders),*])
            }

            fn from_values(
                meta: #rm::ReadModelMeta,
                values: ::std::vec::Vec<#rm::Value>,
                _fields: &[#rm::FieldDescriptor],
            ) -> ::core::result::Result<Self, #root::error::ReadModelError> {
                let mut values = values.into_iter();
                ::core::result::Result::Ok(Self {
                    #meta_init,
                    #(#decoders,)*
                })
            }
        }

        impl #impl_generics #name #ty_generics #where_clause {
            #(#consts)*
        }
    })
}
