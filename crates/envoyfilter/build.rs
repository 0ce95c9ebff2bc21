//! Finds the protobuf descriptor set of Envoy's API that the `envoy-types` crate ships
//! (`src/generated/types.bin`, written by its prost-build run) and copies it to `OUT_DIR`, so the
//! EnvoyFilter code can read patch values of any Envoy message type by reflection. Nothing is vendored:
//! the file comes from the `envoy-types` package cargo already downloaded.
//!
//! Search order: `MESHPILOT_ENVOY_DESCRIPTORS` (a path to the file), then the `envoy-types` version
//! locked in the workspace's `Cargo.lock` under `$CARGO_HOME/registry/src/*/` (default `~/.cargo`),
//! then a `vendor/envoy-types` directory beside the workspace.

use std::{
    env, fs,
    path::{Path, PathBuf},
};

fn locked_version(workspace: &Path) -> Option<String> {
    let lock = fs::read_to_string(workspace.join("Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"envoy-types\"" {
            let version = lines.next()?.trim();
            return version.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_string);
        }
    }
    None
}

fn candidates(workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(path) = env::var("MESHPILOT_ENVOY_DESCRIPTORS") {
        out.push(PathBuf::from(path));
    }
    let version = locked_version(workspace).unwrap_or_else(|| "0.7.7".to_string());
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home
        && let Ok(entries) = fs::read_dir(home.join("registry").join("src"))
    {
        for entry in entries.flatten() {
            out.push(entry.path().join(format!("envoy-types-{version}/src/generated/types.bin")));
        }
    }
    out.push(workspace.join("vendor/envoy-types/src/generated/types.bin"));
    out
}

fn main() {
    println!("cargo:rerun-if-env-changed=MESHPILOT_ENVOY_DESCRIPTORS");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().and_then(Path::parent).expect("crates/envoyfilter in a workspace");
    let tried = candidates(workspace);
    let found = tried.iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "the envoy-types descriptor set (src/generated/types.bin) was not found; run `cargo fetch` \
             or set MESHPILOT_ENVOY_DESCRIPTORS. Tried: {tried:?}"
        )
    });
    println!("cargo:rerun-if-changed={}", found.display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("envoy_descriptors.bin");
    fs::copy(found, &out).expect("copy the envoy-types descriptor set");
}
