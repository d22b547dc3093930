//! Reading a file the operator named, up to a size: a device with no end
//! (`/dev/zero`, `/dev/urandom`) or a pipe never closed must not fill
//! memory. A cap rather than refusing what is not a regular file, so that
//! a file given through a pipe (`--key-file <(command)`) still works.

use std::io::{self, Read};
use std::path::Path;

/// The bytes of `path`; an error of kind `FileTooLarge` ("it holds more
/// than N MiB") once more than `limit` bytes have been read.
pub fn read_capped(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it holds more than {}", size(limit)),
        ));
    }
    Ok(bytes)
}

/// `limit` in MiB when it is whole MiB, else in bytes.
fn size(limit: u64) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_end_is_refused_at_the_cap() {
        let err = read_capped(Path::new("/dev/zero"), 2 << 20).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(err.to_string(), "it holds more than 2 MiB");
        let err = read_capped(Path::new("/dev/urandom"), 1000).unwrap_err();
        assert_eq!(err.to_string(), "it holds more than 1000 bytes");
        let file = std::env::temp_dir().join(format!("pgcoord-capped-{}", std::process::id()));
        std::fs::write(&file, b"a\nb\n").unwrap();
        assert_eq!(read_capped(&file, 4).unwrap(), b"a\nb\n");
        assert!(read_capped(&file, 3).is_err());
        std::fs::remove_file(&file).unwrap();
    }
}
