//! The dependency rule of DESIGN.md, checked: a crate never depends on a crate above it.

#[cfg(test)]
mod tests {
    /// Layer of each workspace package, bottom up. Equal layers may not depend on each other
    /// except where listed in `ALLOWED_SAME_LAYER`.
    const LAYERS: &[(&str, u32)] = &[
        ("memory-budget", 0),
        ("bls-repr", 0),
        ("pinion-kernels", 0),
        ("pinion-bench", 0),
        ("gpu-device", 1),
        ("srs-store", 2),
        ("pce-cache", 1),
        ("gpu-msm", 3),
        ("gpu-ntt", 3),
        ("groth16-prover", 4),
        ("pinion-engine", 5),
        ("pinion-filecoin", 5),
        ("pinion-daemon", 6),
        ("pinion-stress", 6),
        ("pinion", 7),
        ("pinion-fuzz", 8),
    ];

    fn layer(name: &str) -> Option<u32> {
        LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
    }

    #[test]
    fn dependencies_point_down() {
        let root = crate::workspace_root();
        let mut manifests = vec![root.join("cuda-kernels/Cargo.toml")];
        for e in std::fs::read_dir(root.join("crates")).unwrap() {
            manifests.push(e.unwrap().path().join("Cargo.toml"));
        }
        let mut checked = 0;
        for m in manifests {
            let text = std::fs::read_to_string(&m).unwrap();
            let name = crate::cargo_json::package_name(&text).unwrap();
            let Some(own) = layer(&name) else {
                panic!(
                    "{name} ({}) has no layer in xtask/src/layers.rs",
                    m.display()
                )
            };
            // Normal dependencies only: dev-dependencies may reach up for test oracles.
            let deps = text
                .split("[dependencies]")
                .nth(1)
                .map(|s| s.split("\n[").next().unwrap_or(""))
                .unwrap_or("");
            for line in deps.lines() {
                let Some(dep) = line.split(['.', ' ', '=']).next() else {
                    continue;
                };
                if let Some(l) = layer(dep) {
                    assert!(
                        l < own,
                        "{name} (layer {own}) depends on {dep} (layer {l}): dependencies must point down"
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            checked > 0,
            "no workspace dependency edges found: the parser is broken"
        );
    }
}
