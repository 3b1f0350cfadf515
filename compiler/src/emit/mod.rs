//! Emitters for the bundle files: `config` (the `NAME_config` tables in the object), `weights` (the constant
//! area image), `header` (`NAME.h` from `templates/bundle.h.tmpl`) and `recipe` (`NAME.recipe.json`).

pub mod config;
pub mod header;
pub mod recipe;
pub mod segments;
pub mod weights;
