//! `#[derive(StateCodec)]`: the canonical state encoding of `clasp-operators` for a user's own
//! state type, so that an operator's state needs no hand-written `encode`/`decode`.
//!
//! The derived encoding is the fields' own encodings in declaration order (an enum first
//! writes its variant's index as one byte), exactly what one would write by hand. It is
//! field-wise rather than a copy of an archive layout because it is what state digests hash:
//! it must stay the same across compiler and library upgrades, and two equal values must
//! encode to the same bytes. Use it through `clasp_operators::StateCodec`, which re-exports it
//! beside the trait.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, parse_macro_input, parse_quote};

/// Most variants an enum state may have: the variant index is one byte.
const VARIANTS_MAX: usize = 256;

/// Derives `clasp_operators::codec::StateCodec` field by field (see the crate docs).
#[proc_macro_derive(StateCodec)]
pub fn derive_state_codec(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(mut input: DeriveInput) -> syn::Result<Tokens> {
    let codec: syn::Path = parse_quote!(::clasp_operators::codec::StateCodec);
    for param in input.generics.type_params_mut() {
        param.bounds.push(parse_quote!(#codec));
    }
    let (encode, decode) = match &input.data {
        Data::Struct(s) => struct_bodies(&s.fields),
        Data::Enum(e) => enum_bodies(e)?,
        Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span,
                "StateCodec cannot be derived for a union",
            ));
        }
    };
    let name = &input.ident;
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #codec for #name #type_generics #where_clause {
            fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                #encode
            }
            fn decode(
                input: &mut &[u8],
            ) -> ::std::result::Result<Self, ::clasp_operators::codec::DecodeError> {
                #decode
            }
        }
    })
}

/// Names that bind a struct's or a variant's fields in a pattern: `f0, f1, ...`.
fn bindings(fields: &Fields) -> Vec<syn::Ident> {
    (0..fields.len()).map(|i| format_ident!("f{i}")).collect()
}

/// The pattern (or constructor) of `path` with its fields bound to `names`.
fn shape(path: &Tokens, fields: &Fields, names: &[syn::Ident], values: &[Tokens]) -> Tokens {
    match fields {
        Fields::Named(named) => {
            let idents = named.named.iter().map(|f| &f.ident);
            if values.is_empty() {
                quote!(#path { #(#idents: #names),* })
            } else {
                quote!(#path { #(#idents: #values),* })
            }
        }
        Fields::Unnamed(_) if values.is_empty() => quote!(#path ( #(#names),* )),
        Fields::Unnamed(_) => quote!(#path ( #(#values),* )),
        Fields::Unit => quote!(#path),
    }
}

/// One decode expression per field, in order.
fn decoders(fields: &Fields) -> Vec<Tokens> {
    fields
        .iter()
        .map(|f| {
            let ty = &f.ty;
            quote!(<#ty as ::clasp_operators::codec::StateCodec>::decode(input)?)
        })
        .collect()
}

fn struct_bodies(fields: &Fields) -> (Tokens, Tokens) {
    let names = bindings(fields);
    let pattern = shape(&quote!(Self), fields, &names, &[]);
    let build = shape(&quote!(Self), fields, &names, &decoders(fields));
    let encode = quote! {
        let #pattern = self;
        #( ::clasp_operators::codec::StateCodec::encode(#names, out); )*
    };
    (encode, quote!(::std::result::Result::Ok(#build)))
}

fn enum_bodies(data: &syn::DataEnum) -> syn::Result<(Tokens, Tokens)> {
    if data.variants.len() > VARIANTS_MAX {
        return Err(syn::Error::new(
            data.enum_token.span,
            format!("StateCodec: an enum state has at most {VARIANTS_MAX} variants"),
        ));
    }
    let mut encode_arms = Vec::new();
    let mut decode_arms = Vec::new();
    for (index, variant) in data.variants.iter().enumerate() {
        let tag = u8::try_from(index).expect("variant count checked");
        let ident = &variant.ident;
        let path = quote!(Self::#ident);
        let names = bindings(&variant.fields);
        let pattern = shape(&path, &variant.fields, &names, &[]);
        let build = shape(&path, &variant.fields, &names, &decoders(&variant.fields));
        encode_arms.push(quote! {
            #pattern => {
                out.push(#tag);
                #( ::clasp_operators::codec::StateCodec::encode(#names, out); )*
            }
        });
        decode_arms.push(quote!(#tag => ::std::result::Result::Ok(#build),));
    }
    let encode = quote! {
        match self {
            #(#encode_arms)*
        }
    };
    let decode = quote! {
        let tag = <u8 as ::clasp_operators::codec::StateCodec>::decode(input)?;
        match tag {
            #(#decode_arms)*
            _ => ::std::result::Result::Err(
                ::clasp_operators::codec::DecodeError("bad enum variant"),
            ),
        }
    };
    Ok((encode, decode))
}
