//! A measured table sliced to the one or two axes that vary from step to step, for the cost
//! model's hot path.
//!
//! An operator of a deployment has fixed widths (a GEMM's `n` and `k`, an attention layer's
//! heads per rank); only the batch changes between steps (tokens; sequences and context). A
//! [`Dense`] is the [`Grid`] evaluated once, at the operator's widths, on every measured
//! value of the varying axes (the union over the measured neighbours of those widths): a
//! full cross product, so a step's price is a binary search and a linear blend per axis.
//! Between those values the blend is exactly the grid's (the grid is piecewise linear per
//! axis, with breaks only at measured values); beyond them the edge's utilisation is carried
//! onto the roofline, as the grid does.

use super::grid::{Grid, Priced, Source};

/// A grid evaluated on a full cross product of `N` varying axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense<const N: usize> {
    axes: [Vec<f64>; N],
    /// Row-major: the last axis varies fastest.
    values: Vec<f64>,
    sources: Vec<Source>,
}

impl<const N: usize> Dense<N> {
    /// `grid` at `fixed` (its first axes) on the measured values of the last `N` axes.
    /// `roofline` takes the full coordinates (fixed, then varying).
    pub fn slice(grid: &Grid, fixed: &[f64], roofline: &dyn Fn(&[f64]) -> f64) -> Dense<N> {
        assert_eq!(fixed.len() + N, grid.dims(), "fixed and varying axes make up the grid's");
        let axes: [Vec<f64>; N] = std::array::from_fn(|i| grid.sub_keys(fixed, fixed.len() + i));
        let cells: usize = axes.iter().map(Vec::len).product();
        let (mut values, mut sources) = (Vec::with_capacity(cells), Vec::with_capacity(cells));
        let mut x = fixed.to_vec();
        x.resize(grid.dims(), 0.0);
        for cell in 0..cells {
            let mut rest = cell;
            for i in (0..N).rev() {
                x[fixed.len() + i] = axes[i][rest % axes[i].len()];
                rest /= axes[i].len();
            }
            let p = grid.query(&x, roofline);
            values.push(p.seconds);
            sources.push(p.source);
        }
        Dense { axes, values, sources }
    }

    /// The slice as a carried measurement: every value is at best [`Source::Extrapolated`]
    /// (a table of another variant of the kernel, priced on the query's roofline).
    pub fn carried(mut self) -> Self {
        for s in &mut self.sources {
            *s = s.worst(Source::Extrapolated);
        }
        self
    }

    /// The time at `y` (the varying axes). `roofline(y)` must be cheap: it is called only
    /// beyond the sliced values, on the query and on the edge it is clamped to.
    #[inline]
    pub fn at(&self, y: [f64; N], roofline: impl Fn([f64; N]) -> f64) -> Priced {
        // For each axis: the lower index, the weight of the next one, whether clamped.
        let mut lo = [0usize; N];
        let mut w = [0.0f64; N];
        let mut edge = y;
        let mut clamped = false;
        let mut exact = true;
        for i in 0..N {
            let a = &self.axes[i];
            let j = a.partition_point(|k| *k < y[i]);
            if j < a.len() && a[j] == y[i] {
                lo[i] = j;
            } else if j == 0 || j == a.len() {
                lo[i] = if j == 0 { 0 } else { a.len() - 1 };
                edge[i] = a[lo[i]];
                clamped = true;
            } else {
                lo[i] = j - 1;
                w[i] = (y[i] - a[j - 1]) / (a[j] - a[j - 1]);
                exact = false;
            }
        }
        let mut seconds = 0.0;
        let mut source = if exact { Source::Silicon } else { Source::Interpolated };
        for corner in 0..(1usize << N) {
            let (mut idx, mut weight) = (0usize, 1.0);
            for i in 0..N {
                let up = corner >> (N - 1 - i) & 1 == 1;
                if up && w[i] == 0.0 {
                    weight = 0.0;
                    break;
                }
                weight *= if up { w[i] } else { 1.0 - w[i] };
                idx = idx * self.axes[i].len() + lo[i] + up as usize;
            }
            if weight > 0.0 {
                seconds += weight * self.values[idx];
                source = source.worst(self.sources[idx]);
            }
        }
        if clamped {
            let (at_target, at_edge) = (roofline(y), roofline(edge));
            if at_target > 0.0 && at_edge > 0.0 {
                seconds *= at_target / at_edge;
            }
            source = source.worst(Source::Extrapolated);
        }
        Priced { seconds, source }
    }

    /// The sliced values of axis `i`.
    pub fn axis(&self, i: usize) -> &[f64] {
        &self.axes[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // t(n, m) = 1 + m·n; n = 20 measured at m ∈ {1, 4} only.
    use crate::hardware::kernels::grid::tests::grid;

    #[test]
    fn a_slice_prices_as_the_grid_does() {
        let g = grid();
        let roof = |x: &[f64]| x[0] * x[1];
        let d: Dense<1> = Dense::slice(&g, &[15.0], &roof);
        // Union of the neighbours' m values.
        assert_eq!(d.axis(0), &[1.0, 2.0, 4.0]);
        for m in [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.5] {
            let want = g.query(&[15.0, m], &roof);
            let got = d.at([m], |y| 15.0 * y[0]);
            // Mutation: drop the roofline scaling beyond the edge and m = 6, 0.5 fail.
            assert!((got.seconds - want.seconds).abs() < 1e-9, "m = {m}: {} vs {}", got.seconds, want.seconds);
            assert_eq!(got.source, want.source, "m = {m}");
        }
    }

    #[test]
    fn two_varying_axes_blend_bilinearly() {
        let pts = [(vec![1.0, 1.0], 1.0), (vec![1.0, 3.0], 3.0), (vec![3.0, 1.0], 5.0), (vec![3.0, 3.0], 11.0)];
        let g = Grid::from_points(2, pts).unwrap();
        let d: Dense<2> = Dense::slice(&g, &[], &|_| 1.0);
        // Centre: mean of the corners, 5. Mutation: swap the axes' strides and (2, 1) fails.
        let p = d.at([2.0, 2.0], |_| 1.0);
        assert_eq!((p.seconds, p.source), (5.0, Source::Interpolated));
        assert_eq!(d.at([2.0, 1.0], |_| 1.0).seconds, 3.0);
        assert_eq!(d.at([1.0, 2.0], |_| 1.0).seconds, 2.0);
        assert_eq!(d.at([3.0, 3.0], |_| 1.0), Priced { seconds: 11.0, source: Source::Silicon });
        // Beyond on one axis, interpolated on the other: the edge blend times the roofline ratio.
        let p = d.at([2.0, 6.0], |y| y[0] * y[1]);
        assert_eq!(p.source, Source::Extrapolated);
        assert!((p.seconds - 7.0 * 12.0 / 6.0).abs() < 1e-12, "{}", p.seconds);
    }
}
