//! Every command README and the Python build run asks for the same features
//! of every dependency they share, so that they share one build of arrow,
//! parquet and DataFusion instead of compiling them once per command.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `cargo tree`'s view of a command: `-p` selections (none: the workspace)
/// and whether dev-dependencies are built (as `cargo test` does), which
/// changes feature unification.
struct Build {
    what: &'static str,
    packages: &'static [&'static str],
    dev: bool,
}

const BUILDS: &[Build] = &[
    Build {
        what: "cargo run -p tsjoin-cli",
        packages: &["tsjoin-cli"],
        dev: false,
    },
    Build {
        what: "cargo build (default members)",
        packages: &["datafusion-tsjoin", "tsjoin-cli", "tsjoin-bench"],
        dev: false,
    },
    Build {
        what: "maturin (cargo rustc -p tsjoin-python)",
        packages: &["tsjoin-python"],
        dev: false,
    },
    Build {
        what: "cargo run -p tsjoin-bench",
        packages: &["tsjoin-bench"],
        dev: false,
    },
    Build {
        what: "cargo test -p datafusion-tsjoin",
        packages: &["datafusion-tsjoin"],
        dev: true,
    },
    Build {
        what: "cargo test -p tsjoin-cli",
        packages: &["tsjoin-cli"],
        dev: true,
    },
];

/// Package (`name vX.Y.Z`) → the feature sets it is built with (a crate
/// built for build scripts and for the target can have two).
fn features(packages: &[&str], dev: bool) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(["--format", "{p}|{f}"])
        .args([
            "-e",
            if dev {
                "normal,build,dev"
            } else {
                "normal,build"
            },
        ]);
    if packages.is_empty() {
        cmd.arg("--workspace");
    }
    for p in packages {
        cmd.args(["-p", p]);
    }
    let out = cmd.output().expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((package, rest)) = line.split_once('|') else {
            continue;
        };
        // `name vX.Y.Z (path)`: members are not shared builds.
        if package.contains('(') {
            continue;
        }
        let features = rest.trim_end_matches(" (*)").to_string();
        map.entry(package.trim().to_string())
            .or_default()
            .insert(features);
    }
    map
}

#[test]
fn every_command_builds_dependencies_with_the_same_features() {
    let workspace = features(&[], true);
    assert!(workspace.keys().any(|p| p.starts_with("datafusion v")));
    let mut differences = vec![];
    for build in BUILDS {
        for (package, sets) in features(build.packages, build.dev) {
            if let Some(all) = workspace.get(&package)
                && *all != sets
            {
                differences.push(format!(
                    "{package}: `{}` builds it with features {sets:?}, \
                     `cargo test --workspace` with {all:?}",
                    build.what
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "add the missing features to workspace-hack/Cargo.toml:\n{}",
        differences.join("\n")
    );
}
