//! Golden models with no hardware dependency: bit-exact operator models, and (in later work) the
//! tiled FlashAttention hardware model, the f64 reference and the energy model.

pub mod fp;
pub mod pe;
