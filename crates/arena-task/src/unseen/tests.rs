use super::*;

#[test]
fn category_names_are_their_serialized_names() {
    for c in CATEGORIES {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
    }
}
use crate::shapes::read_decl;

fn visible(src: &str) -> Vec<Value> {
    read_decl(src, "TEST_SHAPES").unwrap().entries
}

#[test]
fn same_seed_same_configs_new_seed_new_configs() {
    let v = visible("TEST_SHAPES = [(1, 128), (64, 1000), (256, 4096), (1024, 8192)]\n");
    let a = generate(
        "t",
        &v,
        GenOptions {
            seed: 7,
            ..Default::default()
        },
    )
    .unwrap();
    let b = generate(
        "t",
        &v,
        GenOptions {
            seed: 7,
            ..Default::default()
        },
    )
    .unwrap();
    let c = generate(
        "t",
        &v,
        GenOptions {
            seed: 8,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 8);
    // All six categories, none equal to a visible shape or to each other.
    for cat in CATEGORIES {
        assert!(
            a.iter().any(|x| x.category == cat),
            "{cat:?} missing: {a:?}"
        );
    }
    let vis: Vec<String> = v.iter().map(Value::to_python).collect();
    for (i, x) in a.iter().enumerate() {
        assert!(!vis.contains(&x.entry), "{x:?}");
        assert!(a[i + 1..].iter().all(|y| y.entry != x.entry), "{x:?}");
    }
}

#[test]
fn six_configurations_cover_the_six_categories_whatever_the_seed() {
    for decl in [
        "TEST_SHAPES = [(1, 128), (64, 1000), (256, 4096), (1024, 8192)]\n",
        "TEST_SHAPES = [(16, 60, 64), (40, 100, 250)]\n",
        "TEST_SHAPES = [(4096,), (65536,)]\n",
    ] {
        let v = visible(decl);
        for seed in 0..25 {
            let a = generate(
                "t",
                &v,
                GenOptions {
                    seed,
                    per_task: 6,
                    ..Default::default()
                },
            )
            .unwrap();
            let cats: std::collections::BTreeSet<_> = a.iter().map(|c| c.category).collect();
            assert_eq!(cats.len(), 6, "{decl} seed {seed}: {a:?}");
        }
    }
}

#[test]
fn dtypes_are_kept_and_the_budget_is_respected() {
    let v = visible("TEST_SHAPES = [(1, 4096, \"float16\"), (2048, 4096, \"bfloat16\")]\n");
    let budget = 64 << 20;
    let a = generate(
        "r",
        &v,
        GenOptions {
            seed: 1,
            per_task: 8,
            memory_budget: budget,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!a.is_empty());
    for x in &a {
        let e = read_decl(&format!("TEST_SHAPES = [{}]\n", x.entry), "TEST_SHAPES")
            .unwrap()
            .entries;
        let f = flatten(&e[0]);
        assert!(
            matches!(&f[2], Value::Str(s) if s == "float16" || s == "bfloat16"),
            "{x:?}"
        );
        assert!(memory_estimate(&f) <= budget, "{x:?}");
    }
}

#[test]
fn alignment_stress_uses_primes_and_scale_up_grows_the_dominant_dimension() {
    let v = visible("TEST_SHAPES = [(16, 16, 16), (32, 48, 64), (64, 64, 64)]\n");
    let a = generate(
        "m",
        &v,
        GenOptions {
            seed: 3,
            per_task: 12,
            memory_budget: 1 << 40,
            ..Default::default()
        },
    )
    .unwrap();
    let ints = |s: &str| -> Vec<i64> {
        s.trim_matches(|c| c == '(' || c == ')')
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect()
    };
    let align = a
        .iter()
        .find(|x| x.category == Category::AlignmentStress)
        .unwrap();
    // Every visible value is a multiple of 16, the smallest 16: a step of 4 (a quarter of the
    // smallest) is kept, so the stress is an odd prime number of 4s.
    assert!(
        ints(&align.entry)
            .iter()
            .all(|d| d % 4 == 0 && PRIMES.contains(&(d / 4))),
        "{align:?}"
    );
    let up = a.iter().find(|x| x.category == Category::ScaleUp).unwrap();
    assert!(ints(&up.entry).iter().max().unwrap() >= &128, "{up:?}");
    // The work bound: no config does more than 16× the largest visible product.
    for x in &a {
        assert!(
            ints(&x.entry).iter().product::<i64>() <= 16 * 64 * 64 * 64,
            "{x:?}"
        );
    }
}

#[test]
fn one_dimensional_and_refusals() {
    let v = visible("TEST_SHAPES = [(1000,), (10000,), (100000,)]\n");
    let a = generate(
        "p",
        &v,
        GenOptions {
            seed: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(a.len(), 8);
    assert!(a.iter().all(|x| x.entry.ends_with(",)")), "{a:?}");
    assert_eq!(
        generate("x", &[], GenOptions::default()),
        Err(GenError::Empty)
    );
    // Entries of several forms are generated form by form, sharing the configurations and
    // covering the six categories together.
    let mixed = visible("TEST_SHAPES = [(60, 250), (120, 1000), (6, 14, 30), (12, 28, 60)]\n");
    let m = generate("x", &mixed, GenOptions::default()).unwrap();
    assert_eq!(m.len(), 8, "{m:?}");
    let commas = |e: &str| e.matches(',').count();
    assert_eq!(
        m.iter().filter(|c| commas(&c.entry) == 1).count(),
        4,
        "{m:?}"
    );
    assert_eq!(
        m.iter().filter(|c| commas(&c.entry) == 2).count(),
        4,
        "{m:?}"
    );
    let cats: std::collections::BTreeSet<_> = m.iter().map(|c| c.category).collect();
    assert_eq!(cats.len(), 6, "{m:?}");
    assert_eq!(m, generate("x", &mixed, GenOptions::default()).unwrap());
    let none = visible("TEST_SHAPES = [(\"a\",), (\"b\",)]\n");
    assert_eq!(
        generate("x", &none, GenOptions::default()),
        Err(GenError::NoDimensions)
    );
}

#[test]
fn a_cubes_asymmetric_configurations_break_its_tie_and_say_so() {
    let cube = visible("TEST_SHAPES = [(4, 4, 4), (16, 16, 16), (64, 64, 64)]\n");
    for seed in 0..10 {
        let a = generate(
            "c",
            &cube,
            GenOptions {
                seed,
                ..Default::default()
            },
        )
        .unwrap();
        let cats: std::collections::BTreeSet<_> = a.iter().map(|c| c.category).collect();
        assert_eq!(cats.len(), 6, "seed {seed}: {a:?}");
        for c in &a {
            let parsed = crate::shapes::Parser::at(&c.entry, 0, "e").value().unwrap();
            let dims: Vec<i64> = entry::flatten(&parsed)
                .iter()
                .filter_map(|v| v.as_int())
                .collect();
            let cubic = dims.iter().all(|&d| d == dims[0]);
            // Only an asymmetric configuration leaves the cube, and it says which tie it
            // breaks; every other category keeps the dimensions equal.
            assert_eq!(c.breaks_tie.is_some(), !cubic, "{c:?}");
            if !cubic {
                assert_eq!(c.category, Category::Asymmetric, "{c:?}");
                assert_eq!(
                    c.breaks_tie.as_deref(),
                    Some("#0 = #1 = #2 in every visible configuration")
                );
            }
            // Held to the rules less the tie, it breaks none of them; the same entry
            // without its mark breaks the tie, and a mark on another category is refused.
            assert!(violations(&cube, &Hints::default(), c).is_empty(), "{c:?}");
            if !cubic {
                let unmarked = UnseenConfig {
                    breaks_tie: None,
                    ..c.clone()
                };
                assert!(!violations(&cube, &Hints::default(), &unmarked).is_empty());
                let other = UnseenConfig {
                    category: Category::ScaleUp,
                    ..c.clone()
                };
                assert!(
                    violations(&cube, &Hints::default(), &other)[0].contains("only an asymmetric")
                );
            }
        }
        assert!(
            a.iter().any(|c| c.breaks_tie.is_some()),
            "seed {seed}: {a:?}"
        );
    }
    // Dimensions that differ somewhere are no cube: what stays tied stays equal in every
    // category, and nothing says it breaks a tie.
    let two = visible("TEST_SHAPES = [(4, 4, 8), (16, 16, 16)]\n");
    let a = generate("d", &two, GenOptions::default()).unwrap();
    assert!(
        a.iter().any(|c| c.category == Category::Asymmetric),
        "{a:?}"
    );
    assert!(a.iter().all(|c| c.breaks_tie.is_none()), "{a:?}");
    for c in &a {
        assert!(violations(&two, &Hints::default(), c).is_empty(), "{c:?}");
    }
}
