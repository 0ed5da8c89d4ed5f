//! The first-party tools built into Airlock (feature `bundled-tools`): the
//! components the build script compiled from `guest-tools/`, and what each
//! one's `describe()` gave, recorded by the BLAKE3 of its bytes. Data only:
//! it knows nothing about running them.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// `bundled-descriptors.json`: each bundled component's descriptor and
/// imports, keyed by the BLAKE3 of its exact bytes.
pub const DESCRIPTORS: &str = include_str!("../bundled-descriptors.json");

/// Where [`DESCRIPTORS`] is kept in the source tree (for regenerating it).
pub const DESCRIPTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bundled-descriptors.json");
