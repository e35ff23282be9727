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
    let data = &bytes[start + header_len..];
    let eb = dtype.bytes();
    // Checked: a damaged or hostile header may claim any shape.
    let need = shape
        .iter()
        .try_fold(eb, |acc, &n| acc.checked_mul(n))
        .with_context(|| format!("shape {shape:?} is too large to be an array in memory"))?;
    if data.len() != need {
        bail!(
            "shape {shape:?} needs {need} bytes of data but the file holds {}",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("regflash-npy-{}-{name}", std::process::id()))
    }

    #[test]
    fn round_trip_both_types_and_shapes() {
        for (dtype, shape) in [
            (DType::F16, vec![3, 5]),
            (DType::F32, vec![2, 3, 4]),
            (DType::F16, vec![7]),
        ] {
            let n: usize = shape.iter().product();
            let mask = if dtype == DType::F16 {
                0xFFFF
            } else {
                u32::MAX
            };
            let data = (0..n as u32)
                .map(|i| i.wrapping_mul(2654435761) & mask)
                .collect();
            let t = Tensor { dtype, shape, data };
            let p = tmp("rt.npy");
            write(&p, &t).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!(header_end % 64, 0, "data is 64-byte aligned");
            assert_eq!(read(&p).unwrap(), t);
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn reads_what_numpy_writes() {
        // np.save of np.array([[1, 2]], dtype=np.float16): version 1.0, padded header.
        let mut b =
            b"\x93NUMPY\x01\x00v\x00{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }"
                .to_vec();
        while b.len() < 10 + 0x76 - 1 {
            b.push(b' ');
        }
        b.push(b'\n');
        b.extend_from_slice(&[0x00, 0x3C, 0x00, 0x40]);
        let t = parse(&b).unwrap();
        assert_eq!(t.shape, vec![1, 2]);
        assert_eq!(t.data, vec![0x3C00, 0x4000]);
    }

    #[test]
    fn malformed_files_are_explained() {
        let ok = Tensor {
            dtype: DType::F32,
            shape: vec![2],
            data: vec![1, 2],
        };
        let p = tmp("bad.npy");
        write(&p, &ok).unwrap();
        let good = std::fs::read(&p).unwrap();
        let swap = |from: &[u8], to: &[u8]| -> Vec<u8> {
            let at = good.windows(from.len()).position(|w| w == from).unwrap();
            let mut b = good.clone();
            b[at..at + from.len()].copy_from_slice(to);
            b
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not an npy file".to_vec(), "magic"),
            (
                swap(b"<f4", b"<i4"),
                "not supported: save float16 or float32",
            ),
            (swap(b"False", b"True "), "Fortran-order"),
            (
                good[..good.len() - 1].to_vec(),
                "needs 8 bytes of data but the file holds 7",
            ),
            (
                // A header whose shape overflows any allocation: refused, no abort or panic.
                {
                    let h = b"{'descr': '<f2', 'fortran_order': False, 'shape': \
                              (4294967296, 4294967296, 4294967296), }\n";
                    let mut b = b"\x93NUMPY\x01\x00".to_vec();
                    b.extend((h.len() as u16).to_le_bytes());
                    b.extend(h);
                    b.extend([0u8; 8]);
                    b
                },
                "too large to be an array in memory",
            ),
        ];
        for (bytes, expect) in cases {
            let err = format!("{:#}", parse(&bytes).unwrap_err());
            assert!(err.contains(expect), "expected `{expect}` in: {err}");
        }
        let err = format!("{:#}", read(Path::new("/nonexistent/q.npy")).unwrap_err());
        assert!(err.contains("cannot read /nonexistent/q.npy"), "{err}");
        std::fs::remove_file(p).unwrap();
    }
}
