//! The memory side: the DMA (read channels with double-buffered landing buffers, the O write
//! channel and its staging buffer) and the landing buffer.

pub mod axi_check;
pub mod dma;
pub mod glb;
pub mod glb_check;
pub mod landing;
pub mod sram;
