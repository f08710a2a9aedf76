//! arena-registry: images in and out of OCI registries (the distribution API), with the store
//! as the only place content lands. A reference is resolved by tag once and pinned by its
//! manifest digest from then on (a fixed-output input, as in Nix); every blob is hashed while
//! it streams into a staging file and enters the store only under the digest it was asked
//! for, so a failed or lying pull leaves nothing behind. Pushes send a stored image's exact
//! bytes, so the registry's manifest digest is the one arena computed.

pub mod auth;
mod client;
pub mod error;
mod pull;
mod push;
#[cfg(feature = "testing")]
pub mod testing;

pub use auth::Credentials;
pub use client::{Registry, RegistryConfig};
pub use error::{RegistryError, Result};
pub use pull::{Pulled, Resolved};
pub use push::Pushed;
