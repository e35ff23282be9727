//! Content-keyed caches: where they live, and the stable hash that keys them (the Verilator
//! models of `verilator_tb`, the ASIC flow's mapped modules).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where built models and mapped netlists are cached: `$REGFLASH_CACHE_DIR`, else `$XDG_CACHE_HOME/regflash`, else
/// `~/.cache/regflash`, else the system temp folder.
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("REGFLASH_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("regflash");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("regflash");
    }
    std::env::temp_dir().join("regflash-cache")
}

/// 64-bit FNV-1a: a stable content hash for cache keys (std's hasher may change between
/// Rust releases).
pub struct Fnv(pub u64);

impl Fnv {
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        // Separate fields so ("ab","c") and ("a","bc") differ.
        self.0 ^= 0xff;
        self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

/// A cached file's length and content hash ("<bytes> <fnv>\n"), recorded when it is built and
/// checked before it is used: a truncated or corrupted entry is built again.
pub fn checksum(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut h = Fnv::new();
    h.feed(&bytes);
    Ok(format!("{} {:016x}\n", bytes.len(), h.0))
}
