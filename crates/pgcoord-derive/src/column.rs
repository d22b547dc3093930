//! The code generated per field: how a [`Column`] converts (through its
//! `FieldKind` or its serde form), its `FieldDescriptor`, and its encoder
//! and decoder in `to_values` / `from_values`.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Lit, Type};

use crate::attrs::ColumnAttrs;

/// Types with a `FieldKind` in `pgcoord`, by last path segment.
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

/// One stored (or skipped) field of the model.
pub(crate) struct Column {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    pub(crate) name: String,
    pub(crate) attrs: ColumnAttrs,
}

pub(crate) fn last_segment(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn is_option(ty: &Type) -> bool {
    last_segment(ty).as_deref() == Some("Option")
}

/// The `T` of an `Option<T>`.
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    match &last.arguments {
        syn::PathArguments::AngleBracketed(args) => match args.args.first()? {
            syn::GenericArgument::Type(inner) => Some(inner),
            _ => None,
        },
        _ => None,
    }
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
    // `Option<T>` converts as `T` does, nullable: look through it.
    let ty = option_inner(&c.ty).unwrap_or(&c.ty);
    let built_in = last_segment(ty).is_some_and(|s| BUILT_IN.contains(&s.as_str()));
    if has_sql_type && !built_in {
        let name = quote!(#ty).to_string().replace(' ', "");
        return Conversion::Serde(
            quote!(#rm::FieldType::Other(::std::string::String::from(#name))),
        );
    }
    Conversion::Kind
}

pub(crate) fn descriptor(c: &Column, rm: &TokenStream2) -> TokenStream2 {
    let ty = &c.ty;
    let col = &c.name;
    let mut t = match conversion(c, rm) {
        // The same `<T as FieldKind>` paths as the encoder's and decoder's,
        // so that a type without one gets one error, not one per use.
        Conversion::Kind => quote_spanned!(ty.span()=> {
            let field = #rm::FieldDescriptor::new(#col, <#ty as #rm::FieldKind>::field_type());
            match <#ty as #rm::FieldKind>::nullable() {
                true => field.nullable(),
                false => field,
            }
        }),
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

pub(crate) fn encoder(c: &Column, rm: &TokenStream2) -> TokenStream2 {
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

pub(crate) fn decoder(c: &Column, rm: &TokenStream2) -> TokenStream2 {
    let ident = &c.ident;
    let ty = &c.ty;
    let col = &c.name;
    if c.attrs.skip {
        // A type without `Default` fails here: point at the field's type.
        return quote_spanned!(ty.span()=> #ident: ::core::default::Default::default());
    }
    let next = quote!(values.next().unwrap_or(#rm::Value::Null));
    let call = match conversion(c, rm) {
        Conversion::Kind => quote_spanned!(ty.span()=> <#ty as #rm::FieldKind>::from_value(#next)),
        Conversion::Serde(_) => quote!(#rm::storage::from_value_via_serde::<#ty>(#next)),
    };
    quote!(#ident: #call.map_err(|e| #rm::storage::field_error::<Self>(#col, e))?)
}

/// What a column stores, as far as its `default = lit` is concerned.
#[derive(Clone, Copy, PartialEq)]
enum Stored {
    /// Text, and what the databases take as a quoted literal: a UUID, a
    /// timestamp, a date.
    Text,
    Integer,
    Float,
    Decimal,
    Bool,
}

impl Stored {
    fn describe(self) -> &'static str {
        match self {
            Stored::Text => "a string literal",
            Stored::Integer => "an integer literal",
            Stored::Float => "a number literal",
            Stored::Decimal => "a number or string literal",
            Stored::Bool => "`true` or `false`",
        }
    }

    fn fits(self, lit: &Lit) -> bool {
        matches!(
            (self, lit),
            (Stored::Text, Lit::Str(_))
                | (Stored::Integer, Lit::Int(_))
                | (Stored::Float, Lit::Int(_) | Lit::Float(_))
                | (Stored::Decimal, Lit::Str(_) | Lit::Int(_) | Lit::Float(_))
                | (Stored::Bool, Lit::Bool(_))
        )
    }
}

/// What the column stores: from `kind = "..."`, else from the field's type
/// (the `T` of an `Option<T>`). `None` for JSON, bytes and any type this
/// derive does not know by name: their defaults are not checked.
fn stored(c: &Column) -> Option<Stored> {
    if let Some((_, variant)) = &c.attrs.kind {
        return match *variant {
            "Text" | "Uuid" | "Timestamp" | "Date" => Some(Stored::Text),
            "Integer" => Some(Stored::Integer),
            "Float" => Some(Stored::Float),
            "Decimal" => Some(Stored::Decimal),
            "Bool" => Some(Stored::Bool),
            _ => None,
        };
    }
    let ty = option_inner(&c.ty).unwrap_or(&c.ty);
    match last_segment(ty)?.as_str() {
        "String" | "Uuid" | "DateTime" | "NaiveDate" => Some(Stored::Text),
        "i64" | "i32" | "i16" | "i8" | "u32" | "u16" | "u8" => Some(Stored::Integer),
        "f64" | "f32" => Some(Stored::Float),
        "bool" => Some(Stored::Bool),
        _ => None,
    }
}

/// `#[column(default = lit)]` must be a literal the column can hold: an
/// integer default on a `String` field compiled, and wrote
/// `TEXT NOT NULL DEFAULT 5`, which reads back as the text "5".
pub(crate) fn check_default(c: &Column) -> syn::Result<()> {
    let (Some(lit), Some(stored)) = (&c.attrs.default, stored(c)) else {
        return Ok(());
    };
    let ty = &c.ty;
    if stored.fits(lit) {
        let inner = option_inner(ty).unwrap_or(ty);
        let what = match &c.attrs.kind {
            Some((_, variant)) => Some((*variant).to_owned()),
            None => last_segment(inner),
        };
        return match what.and_then(|w| crate::default_range::out_of_range(&w, lit)) {
            None => Ok(()),
            Some(why) => Err(syn::Error::new(
                lit.span(),
                format!(
                    "`default = {}` does not fit `{}`: {why}",
                    quote!(#lit),
                    c.ident
                ),
            )),
        };
    }
    let column = match &c.attrs.kind {
        Some((kind, _)) => format!("a column of `kind = \"{}\"`", kind.value()),
        None => format!(
            "a column of type `{}`",
            quote!(#ty).to_string().replace(' ', "")
        ),
    };
    Err(syn::Error::new(
        lit.span(),
        format!(
            "`default = {}` does not fit `{}`: {column} takes {} (for an SQL expression, use `default_sql = \"...\"`)",
            quote!(#lit),
            c.ident,
            stored.describe()
        ),
    ))
}
