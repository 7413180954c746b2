//! Parameters made in memory (`LoadedParams::in_memory`) as a store entry.

use bls_repr::{G1AffineRepr, G2AffineRepr};
use memory_budget::{Budget, Category};
use srs_store::{
    Destination, InMemoryFill, LoadedParams, Section, SrsError, SrsStore, StoreConfig, Tier,
    VerifyingKeyRepr,
};

fn vk(n_ic: usize) -> VerifyingKeyRepr {
    let (g1, g2) = (G1AffineRepr::generator(), G2AffineRepr::generator());
    VerifyingKeyRepr {
        alpha_g1: g1,
        beta_g1: g1,
        beta_g2: g2,
        gamma_g2: g2,
        delta_g1: g1,
        delta_g2: g2,
        ic: vec![g1; n_ic],
    }
}

trait G2Fill: Fn(usize, &mut [G2AffineRepr]) + Sync {}
impl<F: Fn(usize, &mut [G2AffineRepr]) + Sync> G2Fill for F {}

/// Points tiled from two: the generator at even indices, its negation at odd ones, and
/// the section's own for `a` (to see that each section gets its own fill).
fn fill() -> (
    impl Fn(Section, usize, &mut [G1AffineRepr]) + Sync,
    impl G2Fill,
) {
    let g1 = |section: Section, first: usize, out: &mut [G1AffineRepr]| {
        let g = G1AffineRepr::generator();
        for (i, p) in out.iter_mut().enumerate() {
            *p = if section == Section::A || (first + i) % 2 == 0 {
                g
            } else {
                g.neg()
            };
        }
    };
    let g2 = |first: usize, out: &mut [G2AffineRepr]| {
        let g = G2AffineRepr::generator();
        for (i, p) in out.iter_mut().enumerate() {
            *p = if (first + i) % 2 == 0 { g } else { g.neg() };
        }
    };
    (g1, g2)
}

#[test]
fn in_memory_entry_is_charged_served_and_never_demoted() {
    let budget = Budget::fixed(1 << 30);
    let (g1, g2) = fill();
    let counts = [7, 5, 4, 3, 3];
    let params = LoadedParams::in_memory(
        vk(2),
        counts,
        Destination::Host,
        &budget,
        &InMemoryFill { g1: &g1, g2: &g2 },
    )
    .expect("in-memory params");
    let bulk = (7 + 5 + 4 + 3) * 96 + 3 * 192;
    let vk_bytes = (3 * 96 + 3 * 192 + 2 * 96) as u64;
    assert_eq!(params.charged_bytes(), bulk + vk_bytes);
    assert_eq!(
        budget.snapshot().used_by_category[Category::Srs.index()],
        bulk + vk_bytes
    );
    assert_eq!(
        params.layout().bulk().map(|s| s.n_points() as usize),
        counts
    );
    assert_eq!(params.layout().ic().n_points(), 2);
    let h = params.h_query().as_host().expect("host bases");
    assert_eq!(h[0], G1AffineRepr::generator());
    assert_eq!(h[1], G1AffineRepr::generator().neg());
    assert!(params
        .a_query()
        .as_host()
        .expect("host bases")
        .iter()
        .all(|p| *p == G1AffineRepr::generator()));
    assert_eq!(
        params.b_g2_query().as_host().expect("host bases")[1],
        G2AffineRepr::generator().neg()
    );

    let store = SrsStore::new(
        budget.clone(),
        StoreConfig {
            min_idle: std::time::Duration::ZERO,
            ..StoreConfig::default()
        },
    );
    let spec = store.insert_in_memory("synthetic", params).expect("insert");
    assert_eq!(spec.path.to_string_lossy(), "memory:synthetic");
    assert_eq!(store.tier_of("synthetic"), Some(Tier::Host));
    assert_eq!(store.verifying_key(&spec).expect("vk").ic.len(), 2);
    assert_eq!(store.layout(&spec).expect("layout").bulk()[1].n_points(), 5);
    {
        let handle = store.get_or_load(&spec).expect("a hit, no file read");
        assert_eq!(handle.tier(), Tier::Host);
        assert_eq!(handle.l_query().len(), 5);
    }
    // Idle and unheld, yet never demoted: there is no file to bring it back from.
    assert_eq!(store.evict_idle(u64::MAX), 0);
    assert_eq!(store.tier_of("synthetic"), Some(Tier::Host));
    // So the budget cannot count on its bytes.
    assert_eq!(budget.reclaimable_bytes(), 0);
    // The id is taken.
    let (g1, g2) = fill();
    let again = LoadedParams::in_memory(
        vk(1),
        [1, 1, 1, 1, 1],
        Destination::Host,
        &budget,
        &InMemoryFill { g1: &g1, g2: &g2 },
    )
    .expect("in-memory params");
    assert!(matches!(
        store.insert_in_memory("synthetic", again),
        Err(SrsError::InMemory { .. })
    ));
    // Explicit eviction forgets it and returns its charge.
    assert_eq!(
        store.evict("synthetic", false).expect("evict"),
        bulk + vk_bytes
    );
    assert_eq!(store.tier_of("synthetic"), None);
    assert_eq!(budget.used_bytes(), 0);
    assert!(matches!(store.get_or_load(&spec), Err(SrsError::Io { .. })));
}

#[test]
fn in_memory_params_refuse_what_the_budget_cannot_hold() {
    let budget = Budget::fixed(1000);
    let (g1, g2) = fill();
    let err = LoadedParams::in_memory(
        vk(1),
        [100, 0, 0, 0, 0],
        Destination::Host,
        &budget,
        &InMemoryFill { g1: &g1, g2: &g2 },
    )
    .expect_err("over the budget");
    assert!(matches!(err, SrsError::Budget { .. }), "{err}");
    assert_eq!(budget.used_bytes(), 0);
}
