//! The first-party tools built into this binary (feature `bundled-tools`):
//! the components the build script compiled from `guest-tools/`.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
