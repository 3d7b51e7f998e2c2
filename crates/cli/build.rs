//! Detect a headless-capable Chromium for the report's rendering test
//! (`cfg(has_chromium)`; the test is ignored, not skipped silently, without one).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_chromium)");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=build.rs");
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|f| f.is_file())
    });
    if let Some(f) = found {
        println!("cargo::rustc-cfg=has_chromium");
        println!("cargo::rustc-env=TLBLAB_CHROMIUM={}", f.display());
    }
}
