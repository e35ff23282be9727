//! Golden models with no hardware dependency: the number formats (`format`), bit-exact operator
//! models (`fp`), the reduction orders (`reduce`), the online-softmax arithmetic (`softmax`), the
//! causal mask (`mask`), the host's rounding of inputs to the operand format (`operands`), the PE (`pe`), the tiled FlashAttention hardware model (`flash`) and the
//! f64 and plain low-precision references (`reference`), FlashAttention-2's backward pass
//! (`backward`) and its references and contract (`backward_reference`), the vertical links' spare lanes and
//! repair (`link`), and the per-event energy table
//! (`energy`).

pub mod accuracy;
pub mod backward;
pub mod backward_reference;
pub mod batch;
pub mod csr;
pub mod energy;
pub mod flash;
pub mod format;
pub mod fp;
pub mod link;
pub mod mask;
pub mod noc;
pub mod operands;
pub mod patterns;
pub mod pe;
pub mod quant;
pub mod reduce;
pub mod reference;
pub mod softmax;
pub mod sram;
