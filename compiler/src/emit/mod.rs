//! Emitters for the bundle files: `config` (the `NAME_config` tables in the object), `weights` (the constant
//! area image), `header` (`NAME.h` from `templates/bundle.h.tmpl`) and `recipe` (`NAME.recipe.json`); `inspect` reads an
//! object's config back. `ident` decides what names from a model may become in generated source.

pub mod config;
pub mod header;
pub mod ident;
pub mod inspect;
pub mod inspect_text;
pub mod recipe;
pub mod report;
pub mod segments;
pub mod weights;
