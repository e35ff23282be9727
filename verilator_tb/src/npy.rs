//! Reading and writing `.npy` files of FP16 and FP32 arrays (NumPy format 1.0 to 3.0,
//! little-endian, C order), the exchange format for Q, K, V and O tensors.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F16,
    F32,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F16 => 2,
            DType::F32 => 4,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            DType::F16 => "<f2",
            DType::F32 => "<f4",
        }
    }
}

/// A tensor: element bits (FP16 in the low half), shape, C order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<u32>,
}

impl Tensor {
    /// The little-endian bytes of the elements.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() * self.dtype.bytes());
        for &x in &self.data {
            out.extend_from_slice(&x.to_le_bytes()[..self.dtype.bytes()]);
        }
        out
    }
}

/// Reads a `.npy` file of float16 or float32 values.
pub fn read(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&bytes).with_context(|| format!("{} is not a usable .npy file", path.display()))
}

/// Parses `.npy` bytes.
pub fn parse(bytes: &[u8]) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("it does not start with the .npy magic string");
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                bail!("the header is truncated");
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => bail!("format version {v} is not supported (1, 2 and 3 are)"),
    };
    let header = bytes
        .get(start..start + header_len)
        .context("the header is truncated")?;
    let header = std::str::from_utf8(header).context("the header is not text")?;
    let field = |key: &str| -> Result<&str> {
        let at = header
            .find(&format!("'{key}'"))
            .with_context(|| format!("the header has no '{key}'"))?;
        let rest = &header[at + key.len() + 2..];
        let colon = rest.find(':').context("malformed header")?;
        Ok(rest[colon + 1..].trim_start())
    };
    let descr = field("descr")?;
    let dtype = if descr.starts_with("'<f2'") || descr.starts_with("'|f2'") {
        DType::F16
    } else if descr.starts_with("'<f4'") {
        DType::F32
    } else {
        let d: String = descr.chars().take_while(|&c| c != ',').collect();
        bail!("element type {d} is not supported: save float16 or float32 (little-endian)");
    };
    if field("fortran_order")?.starts_with("True") {
        bail!("Fortran-order arrays are not supported: save with np.ascontiguousarray");
    }
    let shape_text = field("shape")?;
    let close = shape_text.find(')').context("malformed shape")?;
    let shape: Vec<usize> = shape_text[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().with_context(|| format!("bad shape entry `{s}`")))
        .collect::<Result<_>>()?;
    let n: usize = shape.iter().product();
    let data = &bytes[start + header_len..];
    let eb = dtype.bytes();
    if data.len() != n * eb {
        bail!(
            "shape {shape:?} needs {} bytes of data but the file holds {}",
            n * eb,
            data.len()
        );
    }
    let values = data
        .chunks(eb)
        .map(|c| match dtype {
            DType::F16 => u16::from_le_bytes([c[0], c[1]]) as u32,
            DType::F32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        })
        .collect();
    Ok(Tensor {
        dtype,
        shape,
        data: values,
    })
}

/// Writes `t` as a version 1.0 `.npy` file.
pub fn write(path: &Path, t: &Tensor) -> Result<()> {
    let shape = match t.shape.len() {
        1 => format!("({},)", t.shape[0]),
        _ => format!(
            "({})",
            t.shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        t.dtype.descr()
    );
    // Pad so that the data starts on a 64-byte boundary; the header ends with a newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.bytes());
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}
