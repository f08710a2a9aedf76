//! How a configuration of each category is made from a form's visible configurations. Each
//! category proposes candidates in the order it prefers them and takes the first that
//! `fits` (kept in the rules, the memory budget and the work bound once snapped, and new);
//! where none does, its last candidate goes back and the caller counts a failed try. So a
//! category gives way only where the rules and budgets truly leave it no room, not because
//! one random draw missed.

use super::rules::Rules;
use super::{Category, Rng, HIDDEN, PRIMES, TOKENS};
use crate::shapes::Value;

/// A form's visible configurations (flattened) and what generation reads off them.
pub(super) struct Space<'a> {
    pub flats: &'a [Vec<Value>],
    pub rules: &'a Rules,
    /// The dimensions that may be varied (one of each class of equal dimensions).
    pub dims: Vec<usize>,
    /// The dimension with the largest visible value.
    pub dominant: usize,
    /// The visible configurations needing the most and the least memory.
    pub largest: Vec<Value>,
    pub smallest: Vec<Value>,
}

/// `xs` in a random order (each drawn once), so that seeds differ in what they try first.
fn shuffled(mut xs: Vec<i64>, rng: &mut Rng) -> Vec<i64> {
    let mut out = Vec::with_capacity(xs.len());
    while !xs.is_empty() {
        out.push(xs.remove((rng.next() % xs.len() as u64) as usize));
    }
    out
}

fn set(f: &mut [Value], p: usize, v: i64) {
    f[p] = Value::Int(v.max(1));
}

/// The first candidate that fits; else the last one (or `fallback` where there was none).
fn first_fit(
    candidates: Vec<Vec<Value>>,
    fallback: Vec<Value>,
    fits: &dyn Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut last = fallback;
    for c in candidates {
        if fits(&c) {
            return c;
        }
        last = c;
    }
    last
}

impl<'a> Space<'a> {
    /// What generation reads off a form's visible configurations; `None` where the rules
    /// leave no dimension to vary.
    pub fn new(flats: &'a [Vec<Value>], rules: &'a Rules) -> Option<Space<'a>> {
        let largest = flats
            .iter()
            .max_by_key(|f| super::memory_estimate(f))?
            .clone();
        let smallest = flats
            .iter()
            .min_by_key(|f| super::memory_estimate(f))?
            .clone();
        let mut space = Space {
            flats,
            rules,
            dims: rules.free(),
            dominant: 0,
            largest,
            smallest,
        };
        // The dominant dimension: the one with the largest visible value.
        space.dominant = *space
            .dims
            .iter()
            .max_by_key(|&&p| (space.max_of(p), std::cmp::Reverse(p)))?;
        Some(space)
    }

    pub fn max_of(&self, p: usize) -> i64 {
        self.flats
            .iter()
            .filter_map(|f| f[p].as_int())
            .max()
            .unwrap_or(1)
    }

    pub fn min_of(&self, p: usize) -> i64 {
        self.flats
            .iter()
            .filter_map(|f| f[p].as_int())
            .min()
            .unwrap_or(1)
    }

    /// A configuration of `category`, starting from a random visible one (its dtype and
    /// flags are kept).
    pub fn make(
        &self,
        category: Category,
        rng: &mut Rng,
        fits: &dyn Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let f = self.flats[(rng.next() % self.flats.len() as u64) as usize].clone();
        match category {
            Category::EdgeCase => self.edge_case(f, rng, fits),
            Category::ScaleUp => self.scale_up(rng, fits),
            Category::ScaleDown => self.scale_down(rng, fits),
            Category::AlignmentStress => self.alignment_stress(f, rng),
            Category::Asymmetric => self.asymmetric(f, rng, fits),
            Category::ProductionRealistic => self.production_realistic(f, rng, fits),
        }
    }

    /// Batch of 1, and a dimension exactly a common block size. With one dimension to vary,
    /// the smallest configuration with it at 1, 2 or a block size no larger than its visible
    /// largest (larger would be a scale-up), in a random order.
    fn edge_case(
        &self,
        mut f: Vec<Value>,
        rng: &mut Rng,
        fits: &dyn Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let dims = &self.dims;
        set(&mut f, dims[0], 1);
        if dims.len() > 1 {
            let p = dims[1 + (rng.next() % (dims.len() as u64 - 1)) as usize];
            set(&mut f, p, rng.pick(&[16, 32, 64, 128, 256, 1024]));
            return f;
        }
        let top = self.max_of(dims[0]);
        let sizes: Vec<i64> = [1, 2, 16, 32, 64, 128, 256, 1024]
            .into_iter()
            .filter(|&v| v <= top.max(2))
            .collect();
        let candidates = shuffled(sizes, rng)
            .into_iter()
            .map(|v| {
                let mut g = self.smallest.clone();
                set(&mut g, dims[0], v);
                g
            })
            .collect();
        first_fit(candidates, f, fits)
    }

    /// The dominant dimension two to four times its visible largest: in the largest
    /// configuration, or where that grown does not fit, the one holding the dominant
    /// dimension's largest value; a smaller factor where the drawn one does not fit either.
    fn scale_up(&self, rng: &mut Rng, fits: &dyn Fn(&[Value]) -> bool) -> Vec<Value> {
        let d = self.dominant;
        let top = self.max_of(d);
        let holder = self
            .flats
            .iter()
            .filter(|g| g[d].as_int() == Some(top))
            .min_by_key(|g| super::memory_estimate(g))
            .expect("the largest value is held by one")
            .clone();
        let k0 = rng.pick(&[2, 3, 4]);
        let mut candidates = Vec::new();
        for k in (2..=k0).rev() {
            for base in [&self.largest, &holder] {
                let mut g = base.clone();
                set(&mut g, d, top * k);
                candidates.push(g);
            }
        }
        first_fit(candidates, self.largest.clone(), fits)
    }

    /// Below the visible smallest: the largest dimension that can still shrink there and stay
    /// a multiple of what it must be. Where every dimension is already at its least (a
    /// visible `(1, 1)`), a visible workload made smaller: the largest configuration's
    /// dominant dimension divided by 2 to 8.
    fn scale_down(&self, rng: &mut Rng, fits: &dyn Fn(&[Value]) -> bool) -> Vec<Value> {
        let rules = self.rules;
        let k = rng.pick(&[2, 4, 8]);
        let mut candidates = Vec::new();
        let below = self
            .dims
            .iter()
            .copied()
            .filter(|&p| self.min_of(p) >= 2 * rules.multiple_of(p))
            .max_by_key(|&p| (self.max_of(p), std::cmp::Reverse(p)));
        if let Some(p) = below {
            let m = rules.multiple_of(p);
            let mut g = self.smallest.clone();
            set(&mut g, p, (self.min_of(p) / k / m * m).max(m));
            candidates.push(g);
        }
        let d = self.dominant;
        let m = rules.multiple_of(d);
        if let Some(top) = self.largest[d].as_int() {
            for div in [k, 2, 3, 4, 6, 8] {
                let v = (top / div / m * m).max(m);
                if v < top {
                    let mut g = self.largest.clone();
                    set(&mut g, d, v);
                    candidates.push(g);
                }
            }
        }
        first_fit(candidates, self.smallest.clone(), fits)
    }

    fn alignment_stress(&self, mut f: Vec<Value>, rng: &mut Rng) -> Vec<Value> {
        for &p in &self.dims {
            // An odd prime number of the dimension's required multiple, near its visible
            // range: a multiple of nothing larger.
            let m = self.rules.multiple_of(p);
            let hi = (self.max_of(p) / m).max(3);
            let near: Vec<i64> = PRIMES.iter().copied().filter(|&q| q <= hi * 2).collect();
            set(
                &mut f,
                p,
                m * rng.pick(if near.is_empty() { PRIMES } else { &near }),
            );
        }
        f
    }

    /// Two dimensions far apart (M = 1, N = 65536): another dimension at its least, the
    /// dominant one up to eight times its visible largest (at most 65536, halved until it fits
    /// the budgets). With one dimension to vary: a long one, a round size plus a remainder,
    /// past its visible largest.
    fn asymmetric(
        &self,
        f: Vec<Value>,
        rng: &mut Rng,
        fits: &dyn Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let rules = self.rules;
        let long = self.dominant;
        let top = self.max_of(long);
        let mut candidates = Vec::new();
        // A cube comes here with its tie taken off (unseen::generate_form): its dimensions
        // are then as free as any others.
        if let Some(&short) = self.dims.iter().find(|&&p| p != long) {
            let mut base = f.clone();
            set(&mut base, short, rules.multiple_of(short));
            let mut v = (top * 8).min(65536).max(top + 1);
            while v > top {
                let mut g = base.clone();
                set(&mut g, long, v);
                candidates.push(g);
                v /= 2;
            }
            let mut g = base;
            set(&mut g, long, top);
            candidates.push(g);
        } else {
            let m = rules.multiple_of(long);
            let mut round = rng.pick(&[2, 3]) * top.max(32768);
            while round > top {
                let mut g = f.clone();
                set(&mut g, long, round / m * m + m);
                candidates.push(g);
                round /= 2;
            }
        }
        first_fit(candidates, f, fits)
    }

    /// Sizes of real transformer workloads: tokens for the first dimension and model widths
    /// for the others, each up to four times its visible largest (a small task stays small);
    /// with one dimension, a token count or a flattened tokens × width activation.
    fn production_realistic(
        &self,
        f: Vec<Value>,
        rng: &mut Rng,
        fits: &dyn Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let dims = &self.dims;
        let mut candidates = Vec::new();
        if dims.len() >= 2 {
            for _ in 0..8 {
                let mut g = f.clone();
                let d0 = dims[0];
                let tokens: Vec<i64> = TOKENS
                    .iter()
                    .copied()
                    .filter(|&t| t <= 4 * self.max_of(d0))
                    .collect();
                set(
                    &mut g,
                    d0,
                    rng.pick(if tokens.is_empty() { TOKENS } else { &tokens }),
                );
                for &p in &dims[1..] {
                    let widths: Vec<i64> = HIDDEN
                        .iter()
                        .copied()
                        .filter(|&h| h <= 4 * self.max_of(p))
                        .collect();
                    let v = if widths.is_empty() {
                        rng.pick(&[self.min_of(p), self.max_of(p)])
                    } else {
                        rng.pick(&widths)
                    };
                    set(&mut g, p, v);
                }
                candidates.push(g);
            }
        } else {
            let d0 = dims[0];
            let mut sizes: Vec<i64> = TOKENS
                .iter()
                .copied()
                .chain(
                    TOKENS
                        .iter()
                        .flat_map(|t| HIDDEN.iter().map(move |h| t * h)),
                )
                .filter(|&n| n <= 4 * self.max_of(d0))
                .collect();
            sizes.sort_unstable();
            sizes.dedup();
            for v in shuffled(sizes, rng) {
                let mut g = f.clone();
                set(&mut g, d0, v);
                candidates.push(g);
            }
        }
        first_fit(candidates, f, fits)
    }
}
