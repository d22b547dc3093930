//! `#[derive(ReadModel)]` for `eventsource` read models.
//!
//! Use it through `eventsource` (feature `derive`, on by default):
//! `use eventsource::ports::readmodels::ReadModel;` brings both the trait and
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
//! predicate).
//!
//! Field attributes: `#[read_model(meta)]` on the `ReadModelMeta` field (a
//! field whose type is named `ReadModelMeta` is found without it);
//! `#[column(...)]` with `rename = "col"`, `sql_type = "..."`,
//! `sql_type_postgres = "..."`, `sql_type_sqlite = "..."`, `default = lit`
//! (a string, integer, float or bool literal), `default_sql = "expr"`,
//! `kind = "text" | "integer" | "float" | "decimal" | "bool" | "uuid" |
//! "timestamp" | "date" | "json" | "bytes"` (for types without a
//! `FieldKind`; converted through their serde form), `nullable`, and
//! `skip` (not stored; rebuilt with `Default::default()`).

use std::collections::HashMap;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, Ident, Lit, LitStr, Type};

mod attrs;
mod naming;

use attrs::{parse_column, ColumnAttrs, IndexSpec};

/// Derives `eventsource::ports::readmodels::ReadModel`; see the crate docs.
#[proc_macro_derive(ReadModel, attributes(read_model, column))]
pub fn derive_read_model(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    expand(input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

const BASE_COLUMNS: [&str; 5] = ["id", "created_at", "updated_at", "version", "deleted_at"];

/// Types with a `FieldKind` in `eventsource`, by last path segment.
const BUILT_IN: [&str; 18] = [
    "String",
    "i64",
    "i32",
    "i16",
    "i8",
    "u32",
    "u16",
    "u8",
    "f64",
    "f32",
    "bool",
    "Uuid",
    "DateTime",
    "NaiveDate",
    "Value",
    "Vec",
    "Option",
    "JsonValue",
];

struct Column {
    ident: Ident,
    ty: Type,
    name: String,
    attrs: ColumnAttrs,
}

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

    let mut table: Option<LitStr> = None;
    let mut indexes: Vec<IndexSpec> = Vec::new();
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("read_model"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("table") {
                table = Some(meta.value()?.parse()?);
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
                    "unknown #[read_model] attribute; expected `table = \"...\"`, `index(...)` or `unique_index(...)`",
                ));
            }
            Ok(())
        })?;
    }
    let table = table
        .map(|t| t.value())
        .unwrap_or_else(|| naming::pluralize(&naming::snake_case(&name.to_string())));

    let explicit_meta = named.named.iter().any(|f| {
        f.attrs.iter().any(|a| {
            a.path().is_ident("read_model") && a.parse_args::<Ident>().is_ok_and(|i| i == "meta")
        })
    });
    let mut meta_field: Option<Ident> = None;
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
        if !is_meta
            && !explicit_meta
            && meta_field.is_none()
            && last_segment(&field.ty).as_deref() == Some("ReadModelMeta")
        {
            is_meta = true;
        }
        if is_meta {
            if let Some(first) = &meta_field {
                return Err(Error::new(
                    ident.span(),
                    format!("a read model has one meta field; `{first}` is already it"),
                ));
            }
            meta_field = Some(ident);
            continue;
        }
        let name = attrs
            .rename
            .as_ref()
            .map(LitStr::value)
            .unwrap_or_else(|| ident.to_string());
        columns.push(Column {
            ident,
            ty: field.ty.clone(),
            name,
            attrs,
        });
    }
    let Some(meta_field) = meta_field else {
        return Err(Error::new(
            name.span(),
            "#[derive(ReadModel)] needs a `ReadModelMeta` field: add `#[serde(flatten)] #[read_model(meta)] meta: ReadModelMeta`",
        ));
    };

    let mut seen: HashMap<String, Ident> = HashMap::new();
    for c in columns.iter().filter(|c| !c.attrs.skip) {
        if BASE_COLUMNS.contains(&c.name.as_str()) {
            return Err(Error::new(
                c.ident.span(),
                format!(
                    "column `{}` is a base column (ReadModelMeta carries it); rename the field or give it #[column(rename = \"...\")]",
                    c.name
                ),
            ));
        }
        if let Some(first) = seen.get(&c.name) {
            return Err(Error::new(
                c.ident.span(),
                format!(
                    "duplicate column `{}`: field `{first}` already uses it",
                    c.name
                ),
            ));
        }
        seen.insert(c.name.clone(), c.ident.clone());
    }

    let rm = quote!(::eventsource::ports::readmodels);
    let stored: Vec<&Column> = columns.iter().filter(|c| !c.attrs.skip).collect();

    let descriptors = stored.iter().map(|c| descriptor(c, &rm));
    let encoders = stored.iter().map(|c| encoder(c, &rm));
    let decoders = columns.iter().map(|c| decoder(c, &rm));

    let mut index_tokens = Vec::new();
    for spec in &indexes {
        let mut names = Vec::new();
        for col in &spec.columns {
            let Some(c) = stored.iter().find(|c| c.ident == *col) else {
                return Err(Error::new(
                    col.span(),
                    format!("index on `{col}`, which is not a stored field of this model"),
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
            c.ident.to_string().trim_start_matches("r#").to_uppercase(),
            span = c.ident.span()
        );
        let col = &c.name;
        let doc = format!("The column `{col}`.");
        quote!(#[doc = #doc] pub const #const_name: #rm::Column = #rm::Column::new(#col);)
    });

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
                &self.#meta_field
            }

            fn meta_mut(&mut self) -> &mut #rm::ReadModelMeta {
                &mut self.#meta_field
            }

            fn to_values(
                &self,
                _fields: &[#rm::FieldDescriptor],
            ) -> ::core::result::Result<::std::vec::Vec<#rm::Value>, #rm::ReadModelError> {
                ::core::result::Result::Ok(::std::vec![#(#encoders),*])
            }

            fn from_values(
                meta: #rm::ReadModelMeta,
                values: ::std::vec::Vec<#rm::Value>,
                _fields: &[#rm::FieldDescriptor],
            ) -> ::core::result::Result<Self, #rm::ReadModelError> {
                let mut values = values.into_iter();
                ::core::result::Result::Ok(Self {
                    #meta_field: meta,
                    #(#decoders,)*
                })
            }
        }

        impl #impl_generics #name #ty_generics #where_clause {
            #(#consts)*
        }
    })
}

fn last_segment(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn is_option(ty: &Type) -> bool {
    last_segment(ty).as_deref() == Some("Option")
}

/// How a field converts: through its `FieldKind`, or through serde with an
/// explicit field type.
enum Conversion {
    Kind,
    Serde(TokenStream2),
}

fn conversion(c: &Column, rm: &TokenStream2) -> Conversion {
    if let Some((_, variant)) = &c.attrs.kind {
        let v = Ident::new(variant, Span::call_site());
        return Conversion::Serde(quote!(#rm::FieldType::#v));
    }
    let has_sql_type = c.attrs.sql_type.is_some()
        || c.attrs.sql_type_postgres.is_some()
        || c.attrs.sql_type_sqlite.is_some();
    let built_in = last_segment(&c.ty).is_some_and(|s| BUILT_IN.contains(&s.as_str()));
    if has_sql_type && !built_in {
        let ty = &c.ty;
        let name = quote!(#ty).to_string().replace(' ', "");
        return Conversion::Serde(
            quote!(#rm::FieldType::Other(::std::string::String::from(#name))),
        );
    }
    Conversion::Kind
}

fn descriptor(c: &Column, rm: &TokenStream2) -> TokenStream2 {
    let ty = &c.ty;
    let col = &c.name;
    let mut t = match conversion(c, rm) {
        Conversion::Kind => quote_spanned!(ty.span()=> #rm::FieldDescriptor::of::<#ty>(#col)),
        Conversion::Serde(ft) => {
            let mut t = quote!(#rm::FieldDescriptor::new(#col, #ft));
            if is_option(ty) {
                t = quote!(#t.nullable());
            }
            t
        }
    };
    if c.attrs.nullable {
        t = quote!(#t.nullable());
    }
    if let Some(s) = &c.attrs.sql_type {
        t = quote!(#t.with_sql_type(#s));
    }
    if let Some(s) = &c.attrs.sql_type_postgres {
        t = quote!(#t.with_postgres_type(#s));
    }
    if let Some(s) = &c.attrs.sql_type_sqlite {
        t = quote!(#t.with_sqlite_type(#s));
    }
    if let Some(lit) = &c.attrs.default {
        let d = match lit {
            Lit::Str(s) => quote!(#rm::DefaultValue::Text(::std::string::String::from(#s))),
            Lit::Int(i) => quote!(#rm::DefaultValue::Integer(#i)),
            Lit::Float(f) => quote!(#rm::DefaultValue::Float(#f)),
            Lit::Bool(b) => quote!(#rm::DefaultValue::Bool(#b)),
            _ => unreachable!("checked when parsed"),
        };
        t = quote!(#t.with_default(#d));
    }
    if let Some(expr) = &c.attrs.default_sql {
        t = quote!(#t.with_default(#rm::DefaultValue::Expression(::std::string::String::from(#expr))));
    }
    t
}

fn encoder(c: &Column, rm: &TokenStream2) -> TokenStream2 {
    let ident = &c.ident;
    let ty = &c.ty;
    let col = &c.name;
    let call = match conversion(c, rm) {
        Conversion::Kind => {
            quote_spanned!(ty.span()=> <#ty as #rm::FieldKind>::to_value(&self.#ident))
        }
        Conversion::Serde(ft) => quote!(#rm::storage::value_via_serde(&self.#ident, &#ft)),
    };
    quote!(#call.map_err(|e| #rm::storage::field_error::<Self>(#col, e))?)
}

fn decoder(c: &Column, rm: &TokenStream2) -> TokenStream2 {
    let ident = &c.ident;
    let ty = &c.ty;
    let col = &c.name;
    if c.attrs.skip {
        return quote!(#ident: ::core::default::Default::default());
    }
    let next = quote!(values.next().unwrap_or(#rm::Value::Null));
    let call = match conversion(c, rm) {
        Conversion::Kind => quote_spanned!(ty.span()=> <#ty as #rm::FieldKind>::from_value(#next)),
        Conversion::Serde(_) => quote!(#rm::storage::from_value_via_serde::<#ty>(#next)),
    };
    quote!(#ident: #call.map_err(|e| #rm::storage::field_error::<Self>(#col, e))?)
}
