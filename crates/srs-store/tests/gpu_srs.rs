//! Pinned and device destinations (need a CUDA device; skip without one). Every point is
//! read back and compared with `groth16::Parameters::read`. Files are generated in a temp
//! directory, never read through `CARGO_MANIFEST_DIR`.

mod common;

use common::*;
use gpu_device::testing::gpu_or_skip;
use memory_budget::Budget;
use srs_store::{
    Destination, LoadOptions, ParamsFile, PointCheck, SrsSpec, SrsStore, StoreConfig, Tier,
};

const GIB: u64 = 1 << 30;

#[test]
fn pinned_destination_matches_reference() {
    let Some(gpu) = gpu_or_skip("srs-store pinned") else {
        return;
    };
    let seed = seed();
    let bytes = to_bytes(&generate(seed, 2, 40));
    let dir = TempDir::new("gpu-pinned");
    let path = dir.write("p.params", &bytes);
    let file = ParamsFile::open(&path).unwrap();
    let budget = Budget::fixed(GIB);
    let options = LoadOptions {
        check: PointCheck::Curve,
        chunk_bytes: 1000,
        destination: Destination::Pinned(gpu),
        ..LoadOptions::default()
    };
    let plan = file.plan(&options);
    let loaded = file.load(&budget, &options).unwrap();
    assert!(loaded.h_query().as_pinned().is_some());
    assert_same(&loaded, &bytes);
    assert_eq!(budget.used_bytes(), plan.destination_bytes);
    assert_eq!(loaded.charged_bytes(), plan.destination_bytes);
    drop(loaded);
    assert_eq!(budget.used_bytes(), 0);
}

fn download<T: bytemuck::Pod>(gpu: &gpu_device::Gpu, bases: &srs_store::Bases<T>) -> Vec<T> {
    let limbs = gpu
        .download(bases.as_device().expect("device bases"))
        .unwrap();
    bytemuck::cast_slice(&limbs).to_vec()
}

#[test]
fn device_destination_matches_reference_and_charges_vram() {
    let Some(gpu) = gpu_or_skip("srs-store device") else {
        return;
    };
    let seed = seed();
    let params = generate(seed, 2, 40);
    let bytes = to_bytes(&params);
    let dir = TempDir::new("gpu-device");
    let path = dir.write("p.params", &bytes);
    let file = ParamsFile::open(&path).unwrap();
    let budget = Budget::fixed(GIB);
    let vram_before = gpu.vram_budget().used_bytes();
    let options = LoadOptions {
        chunk_bytes: 2000,
        destination: Destination::Device(gpu.clone()),
        ..LoadOptions::default()
    };
    let plan = file.plan(&options);
    let loaded = file.load(&budget, &options).unwrap();
    assert_eq!(
        gpu.vram_budget().used_bytes() - vram_before,
        plan.device_bytes
    );
    assert_eq!(loaded.device_bytes(), plan.device_bytes);
    assert_eq!(
        budget.used_bytes(),
        plan.destination_bytes,
        "host keeps only the verifying key"
    );
    let r = groth16::Parameters::<bls12_381::Bls12>::read(&bytes[..], true).unwrap();
    let check_g1 = |ours: Vec<bls_repr::G1AffineRepr>, theirs: &[bls12_381::G1Affine]| {
        assert_eq!(ours.len(), theirs.len());
        for (o, t) in ours.iter().zip(theirs) {
            assert_eq!(*o, bls_repr::G1AffineRepr::from_affine(t));
        }
    };
    check_g1(download(&gpu, loaded.h_query()), &r.h);
    check_g1(download(&gpu, loaded.l_query()), &r.l);
    check_g1(download(&gpu, loaded.a_query()), &r.a);
    check_g1(download(&gpu, loaded.b_g1_query()), &r.b_g1);
    let b_g2 = download(&gpu, loaded.b_g2_query());
    assert_eq!(b_g2.len(), r.b_g2.len());
    for (o, t) in b_g2.iter().zip(r.b_g2.iter()) {
        assert_eq!(*o, bls_repr::G2AffineRepr::from_affine(t));
    }
    assert_same_vk(loaded.vk(), &params.vk);
    drop(loaded);
    assert_eq!(gpu.vram_budget().used_bytes(), vram_before);
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn store_device_tier_and_explicit_eviction() {
    let Some(gpu) = gpu_or_skip("srs-store store device") else {
        return;
    };
    let seed = seed();
    let dir = TempDir::new("gpu-store");
    let path = dir.write("p.params", &to_bytes(&generate(seed, 1, 20)));
    let budget = Budget::fixed(GIB);
    let store = SrsStore::new(
        budget.clone(),
        StoreConfig {
            min_idle: std::time::Duration::ZERO,
            ..StoreConfig::default()
        },
    );
    let _reg = store.register_device_budget(&gpu);
    let mut spec = SrsSpec::new("d", &path);
    spec.options.destination = Destination::Device(gpu.clone());
    let vram_before = gpu.vram_budget().used_bytes();
    let h = store.get_or_load(&spec).unwrap();
    assert_eq!(h.tier(), Tier::Device);
    let dev = h.device_bytes();
    assert!(dev > 0);
    assert_eq!(store.tier_bytes(Tier::Device), dev);
    assert_eq!(gpu.vram_budget().used_bytes(), vram_before + dev);
    drop(h);
    // Unheld: explicit eviction frees the VRAM at once.
    assert_eq!(store.evict("d", false).unwrap(), dev);
    assert_eq!(store.tier_of("d"), Some(Tier::Mapped));
    assert_eq!(gpu.vram_budget().used_bytes(), vram_before);
    assert_eq!(budget.used_bytes(), 0);
}
