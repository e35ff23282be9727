//! A steady-state compact thermal model of a die stack (`regflash thermal`, docs/thermal.md):
//! an RC grid in the style of HotSpot's grid model and 3D-ICE, in Rust.
//!
//! **The stack.** Layers from the bottom (the C4 side, adiabatic as in HotSpot's default, which
//! has no secondary path) to the top: each tier's silicon, the bond layers between the tiers,
//! and the thermal interface (TIM) under the lid. Every layer covers the die's square footprint
//! and is cut into `n × n` cells; a cell is one node at its centre. A tier's power is
//! dissipated at its silicon layer's nodes (HotSpot does the same), over the tier's floorplan:
//! rectangles, each with a dynamic power and a leakage power at [`Leakage::ref_c`], spread over
//! the cells by exact overlap, so no grid loses or gains power.
//!
//! **Conduction.** Between neighbouring cells of a layer, `k·t` (square cells); between a cell
//! and the one above it, the two half-thicknesses in series, `1 / (t₁/(2k₁A) + t₂/(2k₂A))`;
//! from the TIM's cells to the package node, the TIM's upper half-thickness.
//!
//! **The package** (heat spreader, heat sink and convection) is one node: the die's heat enters
//! the spreader over the die's footprint and the spreader's over its own, each spreading
//! resistance by Lee, Song, Au and Moran's closed form for a centred source on a plate cooled on
//! its far side (ASME/JSME Thermal Engineering Joint Conference 1995, vol. 4, pp. 199-206:
//! square source and plate taken as the circles of their areas, the source's average
//! temperature), then the sink's convection to the ambient. HotSpot grids the spreader and sink
//! instead; over a die of a few mm² on a 30 mm copper spreader the difference is a fraction of
//! a kelvin.
//!
//! **Leakage** grows with temperature as `exp(β·(T − T_ref))`; the solver iterates each cell's
//! leakage to a fixed point, and says so when it has none (thermal runaway).
//!
//! Every default carries its source ([`Package::hotspot`], [`Stack`]'s layers are built by the
//! caller with theirs).

use serde::Serialize;

/// Silicon's conductivity, W/(m·K): HotSpot's 3-D examples (uvahotspot/HotSpot f18831e,
/// examples/example3/example.lcf and example4/ev6_3D.lcf, resistivity 0.01 m·K/W) and its
/// compiled-in default (temperature.c). Bulk silicon is 148 at 300 K and about 110 at 85 °C;
/// 100 is the conservative end.
pub const K_SILICON: f64 = 100.0;
/// A thinned tier's silicon, µm: 3D-ICE's MPSoC die (esl-epfl/3d-ice 39ed2a7, bin/stack.stk:
/// 50 µm of bulk silicon under its BEOL).
pub const THINNED_DIE_UM: f64 = 50.0;
/// The die under the lid, unthinned, µm: HotSpot's `t_chip` (template.config, 0.15 mm).
pub const TOP_DIE_UM: f64 = 150.0;
/// A tier's back-end-of-line stack, µm and W/(m·K): 3D-ICE's BEOL (bin/stack.stk: 10 µm at
/// 2.25e-6 W/(µm·K)).
pub const BEOL_UM: f64 = 10.0;
pub const K_BEOL: f64 = 2.25;
/// The bond between two tiers: micro-bumps with underfill, 16.1 µm high, measured at
/// 8.0 K·mm²/W at 50 µm pitch (Colgan et al., "Measurement of microbump thermal resistance in
/// 3D chip stacks", SEMI-THERM 2012): an effective 2.0 W/(m·K). Hybrid bonds conduct better;
/// this is the conservative end.
pub const BOND_UM: f64 = 16.1;
pub const K_BOND: f64 = 16.1 / 8.0;
/// The hotspot limit the seed's clock was chosen for (°C).
pub const LIMIT_C: f64 = 85.0;

/// One layer of the stack.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layer {
    pub name: String,
    pub thickness_um: f64,
    /// W/(m·K).
    pub k: f64,
    /// Where its thickness and conductivity come from.
    pub source: String,
    /// The blocks dissipating in it (a tier's silicon), or none (a bond layer, the TIM).
    pub blocks: Vec<Block>,
}

/// A rectangle of a tier's floorplan with its power. Coordinates are fractions of the die's
/// side, `0 ≤ x0 < x1 ≤ 1`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Block {
    pub name: String,
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
    /// W, independent of temperature.
    pub dynamic_w: f64,
    /// W at [`Leakage::ref_c`].
    pub leakage_w: f64,
}

impl Block {
    fn area(&self) -> f64 {
        (self.x1 - self.x0) * (self.y1 - self.y0)
    }
    fn contains(&self, x: f64, y: f64) -> bool {
        x >= self.x0 && x < self.x1 && y >= self.y0 && y < self.y1
    }
}

/// The heat spreader, the heat sink and the air, with the ambient.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Package {
    pub tim_um: f64,
    pub k_tim: f64,
    pub spreader_mm: f64,
    pub spreader_um: f64,
    pub k_spreader: f64,
    pub sink_mm: f64,
    pub sink_um: f64,
    pub k_sink: f64,
    /// The sink's convection resistance to the air, K/W.
    pub r_convec: f64,
    pub ambient_c: f64,
    pub source: String,
}

impl Package {
    /// HotSpot's defaults (uvahotspot/HotSpot f18831e: template.config, and temperature.c's
    /// compiled-in `r_convec` 0.1 K/W, which examples/example1 also uses): a 20 µm TIM at
    /// 4 W/(m·K), a 30 mm × 1 mm copper spreader, a 60 mm × 6.9 mm copper sink, 318.15 K air.
    pub fn hotspot() -> Package {
        Package {
            tim_um: 20.0,
            k_tim: 4.0,
            spreader_mm: 30.0,
            spreader_um: 1000.0,
            k_spreader: 400.0,
            sink_mm: 60.0,
            sink_um: 6900.0,
            k_sink: 400.0,
            r_convec: 0.1,
            ambient_c: 45.0,
            source: "HotSpot's defaults (uvahotspot/HotSpot f18831e template.config; r_convec \
                     0.1 K/W as temperature.c and example1)"
                .into(),
        }
    }

    /// K/W from the TIM's top (over a die of `die_m2`) to the air: the spreader's and the
    /// sink's conduction and spreading ([`plate_resistance`]) and the convection.
    pub fn resistance(&self, die_m2: f64) -> f64 {
        let spreader_m2 = (self.spreader_mm * 1e-3).powi(2);
        let sink = plate_resistance(
            spreader_m2,
            (self.sink_mm * 1e-3).powi(2),
            self.sink_um * 1e-6,
            self.k_sink,
            self.r_convec,
        );
        let spreader = plate_resistance(
            die_m2.min(spreader_m2),
            spreader_m2,
            self.spreader_um * 1e-6,
            self.k_spreader,
            sink + self.r_convec,
        );
        spreader + sink + self.r_convec
    }
}

/// The resistance (K/W) of a plate of area `plate_m2`, `t` m thick, conductivity `k`, from a
/// centred source of area `source_m2` (its average temperature) to the plate's far side, which
/// sees `r0` K/W beyond it: Lee, Song, Au and Moran (1995), source and plate as the circles of
/// their areas. It is the plate's one-dimensional `t/(k·A)` plus the spreading term; a source as
/// large as the plate has no spreading.
pub fn plate_resistance(source_m2: f64, plate_m2: f64, t: f64, k: f64, r0: f64) -> f64 {
    let pi = std::f64::consts::PI;
    let a = (source_m2 / pi).sqrt();
    let b = (plate_m2 / pi).sqrt();
    let eps = a / b;
    let tau = t / b;
    let bi = 1.0 / (pi * k * b * r0);
    let lambda = pi + 1.0 / (pi.sqrt() * eps);
    let th = (lambda * tau).tanh();
    let phi = (th + lambda / bi) / (1.0 + lambda / bi * th);
    let psi = eps * tau / pi.sqrt() + 0.5 * (1.0 - eps).powf(1.5) * phi;
    psi / (pi.sqrt() * k * a)
}

/// How leakage follows temperature: `leak(T) = leak(ref_c) · exp(beta · (T − ref_c))`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Leakage {
    pub beta_per_k: f64,
    pub ref_c: f64,
    pub source: String,
}

impl Leakage {
    /// HotSpot's leakage model (uvahotspot/HotSpot f18831e, temperature.c `calc_leakage`:
    /// `exp(0.036·(T − 383.15))`, doubling every 19 K), from the libraries' 25 °C corner
    /// (NangateOpenCellLibrary typical; CACTI's 300 K for the SRAM).
    pub fn hotspot() -> Leakage {
        Leakage {
            beta_per_k: 0.036,
            ref_c: 25.0,
            source: "HotSpot's calc_leakage (exp(0.036 (T - T0)), doubling every 19 K) from the \
                     libraries' 25 °C figures"
                .into(),
        }
    }
    fn factor(&self, t_c: f64) -> f64 {
        (self.beta_per_k * (t_c - self.ref_c)).exp()
    }
}

/// A die stack: its square footprint, its layers from the bottom, the package and leakage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stack {
    /// The footprint's area, mm² (every layer covers it).
    pub footprint_mm2: f64,
    pub layers: Vec<Layer>,
    pub package: Package,
    pub leakage: Leakage,
}

/// One layer's temperatures.
#[derive(Clone, Debug, Serialize)]
pub struct LayerTemps {
    pub name: String,
    pub peak_c: f64,
    pub mean_c: f64,
    /// The block under the peak (tiers only).
    pub hotspot: Option<String>,
    /// Dynamic and leakage power dissipated in the layer at its temperatures, W.
    pub power_w: f64,
    pub leakage_w: f64,
    /// n × n cells, row-major from (0, 0); °C.
    #[serde(skip)]
    pub cells: Vec<f64>,
}

/// A solved stack.
#[derive(Clone, Debug, Serialize)]
pub struct Solution {
    pub grid: usize,
    pub layers: Vec<LayerTemps>,
    /// The package node (the TIM's top face): °C.
    pub package_c: f64,
    pub power_w: f64,
    pub leakage_w: f64,
    /// Leakage iterations to the fixed point.
    pub iterations: usize,
    /// The package's resistance to the air, K/W.
    pub package_k_per_w: f64,
}

impl Solution {
    /// The layers of `stack` that dissipate (its dies), with their temperatures.
    pub fn dies<'a>(
        &'a self,
        stack: &'a Stack,
    ) -> impl Iterator<Item = (&'a Layer, &'a LayerTemps)> {
        stack
            .layers
            .iter()
            .zip(&self.layers)
            .filter(|(l, _)| !l.blocks.is_empty())
    }

    /// The hottest layer's peak (°C).
    pub fn peak_c(&self) -> f64 {
        self.layers
            .iter()
            .map(|l| l.peak_c)
            .fold(f64::MIN, f64::max)
    }
}

/// Why a stack has no steady state.
#[derive(Clone, Debug, PartialEq)]
pub enum ThermalError {
    /// A layer or block is not physical (a thickness, conductivity or power that is not
    /// positive and finite, a block outside the die).
    Invalid(String),
    /// Leakage grows faster with temperature than the package removes it: no fixed point.
    Runaway { last_peak_c: f64 },
    /// The solver did not reach its tolerance.
    NoConvergence(String),
}

impl std::fmt::Display for ThermalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThermalError::Invalid(s) => write!(f, "the thermal stack is not physical: {s}"),
            ThermalError::Runaway { last_peak_c } => write!(
                f,
                "thermal runaway: leakage grows with temperature faster than the package removes \
                 it (the peak passed {last_peak_c:.0} °C with no steady state); lower the clock \
                 or the power"
            ),
            ThermalError::NoConvergence(s) => write!(f, "the thermal solver did not converge: {s}"),
        }
    }
}

impl std::error::Error for ThermalError {}

/// The temperature above which the solver calls the stack a runaway (°C).
const RUNAWAY_C: f64 = 500.0;
/// Leakage iterations before the solver gives up: a stable loop of gain 0.99 needs about
/// 2,500 from 20 K off.
const MAX_LEAKAGE_ITERATIONS: usize = 5000;
/// Conjugate-gradient steps before the solver gives up (a 256-cell grid converges in a few
/// thousand).
const MAX_CG_STEPS: usize = 50_000;

impl Stack {
    fn check(&self, n: usize) -> Result<(), ThermalError> {
        let bad = |s: String| Err(ThermalError::Invalid(s));
        let pos = |x: f64| x.is_finite() && x > 0.0;
        if n == 0 || n > 512 {
            return bad(format!("a grid of {n} cells a side (1 to 512)"));
        }
        if !pos(self.footprint_mm2) {
            return bad(format!("a footprint of {} mm²", self.footprint_mm2));
        }
        if self.layers.is_empty() {
            return bad("no layers".into());
        }
        let p = &self.package;
        for (what, x) in [
            ("TIM thickness", p.tim_um),
            ("TIM conductivity", p.k_tim),
            ("spreader side", p.spreader_mm),
            ("spreader thickness", p.spreader_um),
            ("spreader conductivity", p.k_spreader),
            ("sink side", p.sink_mm),
            ("sink thickness", p.sink_um),
            ("sink conductivity", p.k_sink),
            ("convection resistance", p.r_convec),
        ] {
            if !pos(x) {
                return bad(format!("the package's {what} is {x}"));
            }
        }
        if !p.ambient_c.is_finite() || !self.leakage.beta_per_k.is_finite() {
            return bad("the ambient or the leakage's slope is not finite".into());
        }
        for l in &self.layers {
            if !pos(l.thickness_um) || !pos(l.k) {
                return bad(format!(
                    "layer {} is {} µm at {} W/(m·K)",
                    l.name, l.thickness_um, l.k
                ));
            }
            for b in &l.blocks {
                let inside = 0.0 <= b.x0 && b.x0 < b.x1 && b.x1 <= 1.0 + 1e-12;
                let inside = inside && 0.0 <= b.y0 && b.y0 < b.y1 && b.y1 <= 1.0 + 1e-12;
                if !inside {
                    return bad(format!("block {} of {} is outside the die", b.name, l.name));
                }
                let watts = |w: f64| w.is_finite() && w >= 0.0;
                if !watts(b.dynamic_w) || !watts(b.leakage_w) {
                    return bad(format!(
                        "block {} of {} has power {} W",
                        b.name, l.name, b.dynamic_w
                    ));
                }
            }
        }
        Ok(())
    }

    /// The layers with the TIM on top, as the grid holds them.
    fn with_tim(&self) -> Vec<Layer> {
        let mut layers = self.layers.clone();
        layers.push(Layer {
            name: "TIM".into(),
            thickness_um: self.package.tim_um,
            k: self.package.k_tim,
            source: self.package.source.clone(),
            blocks: vec![],
        });
        layers
    }

    /// The steady state on an `n × n` grid, leakage iterated to its fixed point.
    pub fn solve(&self, n: usize) -> Result<Solution, ThermalError> {
        self.check(n)?;
        let layers = self.with_tim();
        let side = (self.footprint_mm2 * 1e-6).sqrt();
        let grid = Grid::new(&layers, n, side, self.package.resistance(side * side));
        // Each cell's dynamic power and leakage at the reference, by overlap.
        let cells = n * n;
        let mut dynamic = vec![0.0; grid.nodes];
        let mut leak0 = vec![0.0; grid.nodes];
        for (li, l) in layers.iter().enumerate() {
            for b in &l.blocks {
                let area = b.area();
                for (c, share) in overlaps(b, n) {
                    dynamic[li * cells + c] += b.dynamic_w * share / area;
                    leak0[li * cells + c] += b.leakage_w * share / area;
                }
            }
        }
        let ambient = self.package.ambient_c;
        let mut rise = vec![0.0; grid.nodes];
        let mut iterations = 0;
        let mut power = vec![0.0; grid.nodes];
        // Each node's power at the temperatures `rise` says.
        let power_at = |rise: &[f64], power: &mut [f64]| {
            for i in 0..grid.nodes {
                power[i] = dynamic[i] + leak0[i] * self.leakage.factor(ambient + rise[i]);
            }
        };
        loop {
            iterations += 1;
            power_at(&rise, &mut power);
            let next = grid.solve(&power, &rise)?;
            let change = next
                .iter()
                .zip(&rise)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            let peak = ambient + next.iter().copied().fold(0.0, f64::max);
            rise = next;
            if !peak.is_finite() || peak > RUNAWAY_C {
                return Err(ThermalError::Runaway { last_peak_c: peak });
            }
            if iterations > MAX_LEAKAGE_ITERATIONS {
                return Err(ThermalError::NoConvergence(format!(
                    "leakage moved the temperatures {change:.2e} K at its \
                     {MAX_LEAKAGE_ITERATIONS}th iteration"
                )));
            }
            if change < 1e-7 {
                break;
            }
        }
        power_at(&rise, &mut power);
        let out = layers
            .iter()
            .enumerate()
            .map(|(li, l)| {
                let t: Vec<f64> = rise[li * cells..(li + 1) * cells]
                    .iter()
                    .map(|r| ambient + r)
                    .collect();
                let (peak_at, peak) = t
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, f64::MIN), |m, (i, x)| if x > m.1 { (i, x) } else { m });
                let (x, y) = (
                    ((peak_at % n) as f64 + 0.5) / n as f64,
                    ((peak_at / n) as f64 + 0.5) / n as f64,
                );
                let range = li * cells..(li + 1) * cells;
                let p: f64 = power[range.clone()].iter().sum();
                let d: f64 = dynamic[range].iter().sum();
                LayerTemps {
                    name: l.name.clone(),
                    peak_c: peak,
                    mean_c: t.iter().sum::<f64>() / cells as f64,
                    hotspot: l
                        .blocks
                        .iter()
                        .find(|b| b.contains(x, y))
                        .map(|b| b.name.clone()),
                    power_w: p,
                    leakage_w: p - d,
                    cells: t,
                }
            })
            .collect::<Vec<_>>();
        let total: f64 = power.iter().sum();
        Ok(Solution {
            grid: n,
            package_c: ambient + rise[grid.nodes],
            power_w: total,
            leakage_w: total - dynamic.iter().sum::<f64>(),
            iterations,
            layers: out,
            package_k_per_w: grid.r_package,
        })
    }

    /// The closed form of a stack whose every block covers its whole layer (uniform power,
    /// no lateral flow), leakage held at `ref_c`: each layer's temperature (°C), bottom to top
    /// and then the TIM, from the package's resistance and the layers' in series.
    pub fn one_dimensional(&self) -> Vec<f64> {
        let layers = self.with_tim();
        let area = self.footprint_mm2 * 1e-6;
        let r_half = |l: &Layer| l.thickness_um * 1e-6 / (2.0 * l.k * area);
        let power: Vec<f64> = layers
            .iter()
            .map(|l| l.blocks.iter().map(|b| b.dynamic_w + b.leakage_w).sum())
            .collect();
        let total: f64 = power.iter().sum();
        let mut t = vec![0.0; layers.len()];
        let top = layers.len() - 1;
        let package = self.package.ambient_c + total * self.package.resistance(area);
        t[top] = package + total * r_half(&layers[top]);
        for li in (0..top).rev() {
            let below: f64 = power[..=li].iter().sum();
            t[li] = t[li + 1] + below * (r_half(&layers[li]) + r_half(&layers[li + 1]));
        }
        t
    }
}

/// The cells of an `n × n` grid a block overlaps, with the overlap (as a fraction of the die).
fn overlaps(b: &Block, n: usize) -> Vec<(usize, f64)> {
    let nf = n as f64;
    let span = |lo: f64, hi: f64| {
        let first = ((lo * nf).floor() as usize).min(n - 1);
        let last = (((hi * nf).ceil() as usize).max(first + 1)).min(n);
        (first..last).map(move |i| {
            let (c0, c1) = (i as f64 / nf, (i + 1) as f64 / nf);
            (i, (hi.min(c1) - lo.max(c0)).max(0.0))
        })
    };
    let mut out = vec![];
    for (j, h) in span(b.y0, b.y1) {
        for (i, w) in span(b.x0, b.x1) {
            if w * h > 0.0 {
                out.push((j * n + i, w * h));
            }
        }
    }
    out
}

/// The conductance network: layers of n × n nodes and the package node last.
struct Grid {
    n: usize,
    /// Layers × n² cells, and the package node.
    nodes: usize,
    /// Per layer: the lateral conductance between neighbours (W/K).
    lateral: Vec<f64>,
    /// Per layer: the conductance to the layer above (the last: to the package node).
    up: Vec<f64>,
    /// The package node to the air.
    to_air: f64,
    r_package: f64,
}

impl Grid {
    fn new(layers: &[Layer], n: usize, side_m: f64, r_package: f64) -> Grid {
        let a = (side_m / n as f64).powi(2);
        let half = |l: &Layer| l.thickness_um * 1e-6 / (2.0 * l.k * a);
        let lateral = layers.iter().map(|l| l.k * l.thickness_um * 1e-6).collect();
        let mut up: Vec<f64> = layers
            .windows(2)
            .map(|w| 1.0 / (half(&w[0]) + half(&w[1])))
            .collect();
        up.push(1.0 / half(&layers[layers.len() - 1]));
        Grid {
            n,
            nodes: layers.len() * n * n,
            lateral,
            up,
            to_air: 1.0 / r_package,
            r_package,
        }
    }

    /// y = G·x over the nodes and the package node (x[nodes]).
    fn apply(&self, x: &[f64], y: &mut [f64]) {
        let n = self.n;
        let cells = n * n;
        let layers = self.lateral.len();
        y.iter_mut().for_each(|v| *v = 0.0);
        for l in 0..layers {
            let g = self.lateral[l];
            let base = l * cells;
            for j in 0..n {
                for i in 0..n {
                    let c = base + j * n + i;
                    if i + 1 < n {
                        let f = g * (x[c] - x[c + 1]);
                        y[c] += f;
                        y[c + 1] -= f;
                    }
                    if j + 1 < n {
                        let f = g * (x[c] - x[c + n]);
                        y[c] += f;
                        y[c + n] -= f;
                    }
                    let above = if l + 1 < layers {
                        c + cells
                    } else {
                        self.nodes
                    };
                    let f = self.up[l] * (x[c] - x[above]);
                    y[c] += f;
                    y[above] -= f;
                }
            }
        }
        y[self.nodes] += self.to_air * x[self.nodes];
    }

    /// G's diagonal.
    fn diagonal(&self) -> Vec<f64> {
        let n = self.n;
        let cells = n * n;
        let layers = self.lateral.len();
        let mut d = vec![0.0; self.nodes + 1];
        for l in 0..layers {
            for j in 0..n {
                for i in 0..n {
                    let c = l * cells + j * n + i;
                    let sides = [i > 0, i + 1 < n, j > 0, j + 1 < n];
                    d[c] += self.lateral[l] * sides.iter().filter(|s| **s).count() as f64;
                    d[c] += self.up[l];
                    if l > 0 {
                        d[c] += self.up[l - 1];
                    }
                }
            }
        }
        d[self.nodes] = self.up[layers - 1] * cells as f64 + self.to_air;
        d
    }

    /// The temperature rises over the air for `power` (W per node; the package node has
    /// none), by conjugate gradients with a Jacobi preconditioner from `start`.
    fn solve(&self, power: &[f64], start: &[f64]) -> Result<Vec<f64>, ThermalError> {
        let m = self.nodes + 1;
        let mut b = power.to_vec();
        b.resize(m, 0.0);
        let mut x = start.to_vec();
        x.resize(m, 0.0);
        let d = self.diagonal();
        let mut ax = vec![0.0; m];
        self.apply(&x, &mut ax);
        let mut r: Vec<f64> = b.iter().zip(&ax).map(|(b, a)| b - a).collect();
        let mut z: Vec<f64> = r.iter().zip(&d).map(|(r, d)| r / d).collect();
        let mut p = z.clone();
        let mut rz: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
        let norm_b = b.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-300);
        let mut ap = vec![0.0; m];
        let mut steps = 0;
        loop {
            let norm_r = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm_r <= 1e-13 * norm_b {
                return Ok(x);
            }
            steps += 1;
            if steps > MAX_CG_STEPS {
                return Err(ThermalError::NoConvergence(format!(
                    "a relative residual of {:.1e} after {MAX_CG_STEPS} steps",
                    norm_r / norm_b
                )));
            }
            self.apply(&p, &mut ap);
            let pap: f64 = p.iter().zip(&ap).map(|(a, b)| a * b).sum();
            if pap <= 0.0 {
                return Ok(x);
            }
            let alpha = rz / pap;
            for i in 0..m {
                x[i] += alpha * p[i];
                r[i] -= alpha * ap[i];
            }
            for i in 0..m {
                z[i] = r[i] / d[i];
            }
            let rz_next: f64 = r.iter().zip(&z).map(|(a, b)| a * b).sum();
            let beta = rz_next / rz;
            rz = rz_next;
            for i in 0..m {
                p[i] = z[i] + beta * p[i];
            }
        }
    }
}

/// A heat map of `layer` as SVG: its cells coloured from `lo` to `hi` °C (blue to red), its
/// blocks outlined and named, and the scale.
pub fn heat_map_svg(
    layer: &LayerTemps,
    blocks: &[Block],
    n: usize,
    (lo, hi): (f64, f64),
) -> String {
    let px = 480.0;
    let cell = px / n as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"4\" y=\"14\">{name}: peak \
         {peak:.1} °C, mean {mean:.1} °C ({lo:.1} to {hi:.1} °C, blue to red)</text>\n",
        w = px + 8.0,
        h = px + 28.0,
        name = xml(&layer.name),
        peak = layer.peak_c,
        mean = layer.mean_c,
    );
    let span = (hi - lo).max(1e-9);
    for j in 0..n {
        for i in 0..n {
            let t = ((layer.cells[j * n + i] - lo) / span).clamp(0.0, 1.0);
            let (r, g, b) = colour(t);
            s += &format!(
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" \
                 fill=\"rgb({r},{g},{b})\"/>\n",
                4.0 + i as f64 * cell,
                20.0 + j as f64 * cell,
                cell + 0.05,
                cell + 0.05
            );
        }
    }
    for b in blocks {
        s += &format!(
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"none\" \
             stroke=\"black\"/>\n<text x=\"{:.2}\" y=\"{:.2}\">{}</text>\n",
            4.0 + b.x0 * px,
            20.0 + b.y0 * px,
            (b.x1 - b.x0) * px,
            (b.y1 - b.y0) * px,
            6.0 + b.x0 * px,
            32.0 + b.y0 * px,
            xml(&b.name)
        );
    }
    s + "</svg>\n"
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Blue (0) through green to red (1).
fn colour(t: f64) -> (u8, u8, u8) {
    let c = |x: f64| (255.0 * x.clamp(0.0, 1.0)).round() as u8;
    (
        c(2.0 * t - 0.5),
        c(1.0 - (2.0 * t - 1.0).abs()),
        c(1.5 - 2.0 * t),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(name: &str, um: f64, k: f64, blocks: Vec<Block>) -> Layer {
        Layer {
            name: name.into(),
            thickness_um: um,
            k,
            source: "test".into(),
            blocks,
        }
    }

    fn block(name: &str, (x0, y0, x1, y1): (f64, f64, f64, f64), w: f64, leak: f64) -> Block {
        Block {
            name: name.into(),
            x0,
            y0,
            x1,
            y1,
            dynamic_w: w,
            leakage_w: leak,
        }
    }

    fn stack(blocks: [Vec<Block>; 2]) -> Stack {
        let [b0, b1] = blocks;
        Stack {
            footprint_mm2: 4.0,
            layers: vec![
                layer("tier 0", THINNED_DIE_UM, K_SILICON, b0),
                layer("bond", BOND_UM, K_BOND, vec![]),
                layer("tier 1", TOP_DIE_UM, K_SILICON, b1),
            ],
            package: Package::hotspot(),
            leakage: Leakage {
                beta_per_k: 0.0,
                ..Leakage::hotspot()
            },
        }
    }

    /// Uniform power in every tier and no lateral flow: the grid reproduces the closed-form
    /// series stack at every grid size (to the solver's tolerance), and the heat that leaves
    /// through the package is the power put in.
    #[test]
    fn uniform_power_is_the_closed_form() {
        let whole = (0.0, 0.0, 1.0, 1.0);
        let s = stack([
            vec![block("a", whole, 1.5, 0.0)],
            vec![block("b", whole, 0.7, 0.0)],
        ]);
        let exact = s.one_dimensional();
        // The bottom tier is hotter: its heat crosses the bond.
        assert!(exact[0] > exact[2] && exact[2] > exact[3], "{exact:?}");
        for n in [1, 4, 16] {
            let sol = s.solve(n).unwrap();
            for (l, t) in sol.layers.iter().zip(&exact) {
                assert!(
                    (l.peak_c - t).abs() < 1e-9,
                    "{n}: {} {} vs {t}",
                    l.name,
                    l.peak_c
                );
                assert!((l.mean_c - t).abs() < 1e-9);
            }
            let out = (sol.package_c - s.package.ambient_c) / sol.package_k_per_w;
            assert!((out - 2.2).abs() < 1e-9, "heat out {out} W");
        }
        // By hand: the bond's rise is the bottom tier's 1.5 W through the bond and the two
        // half-tiers.
        let area = 4e-6;
        let r = (THINNED_DIE_UM / 2.0 / K_SILICON + BOND_UM / 2.0 / K_BOND) * 1e-6 / area;
        let r2 = (BOND_UM / 2.0 / K_BOND + TOP_DIE_UM / 2.0 / K_SILICON) * 1e-6 / area;
        assert!((exact[0] - exact[2] - 1.5 * (r + r2)).abs() < 1e-12);
    }

    /// A hot block in a corner: the peak converges as the grid is refined (each halving of the
    /// cell moves it less than the one before), power is conserved at every size, and the
    /// hotspot is named.
    #[test]
    fn refinement_converges() {
        let s = stack([
            vec![
                block("hot", (0.0, 0.0, 0.25, 0.25), 1.0, 0.0),
                block("rest", (0.25, 0.0, 1.0, 1.0), 0.5, 0.0),
            ],
            vec![block("cool", (0.0, 0.0, 1.0, 1.0), 0.2, 0.0)],
        ]);
        let peaks: Vec<f64> = [8, 16, 32, 64]
            .iter()
            .map(|&n| {
                let sol = s.solve(n).unwrap();
                assert!((sol.power_w - 1.7).abs() < 1e-9);
                assert_eq!(sol.layers[0].hotspot.as_deref(), Some("hot"));
                sol.layers[0].peak_c
            })
            .collect();
        let steps: Vec<f64> = peaks.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        assert!(
            steps[1] < steps[0] && steps[2] < 0.6 * steps[1],
            "{peaks:?}"
        );
        // The peak is well above the uniform case's, which spreads the same power evenly.
        let even = stack([
            vec![block("a", (0.0, 0.0, 1.0, 1.0), 1.5, 0.0)],
            vec![block("b", (0.0, 0.0, 1.0, 1.0), 0.2, 0.0)],
        ]);
        assert!(peaks[3] > even.one_dimensional()[0] + 0.1);
    }

    /// Leakage that grows with temperature: the fixed point is hotter than with leakage held,
    /// its leakage satisfies the model at the solved temperatures, and leakage too steep for
    /// the package is a runaway, not a number.
    #[test]
    fn leakage_reaches_a_fixed_point_or_runs_away() {
        let whole = (0.0, 0.0, 1.0, 1.0);
        let mut s = stack([vec![block("a", whole, 1.0, 0.5)], vec![]]);
        let held = s.solve(4).unwrap();
        s.leakage.beta_per_k = 0.036;
        let hot = s.solve(4).unwrap();
        assert!(hot.peak_c() > held.peak_c() && hot.iterations > 1);
        let expect = 0.5 * (0.036 * (hot.layers[0].mean_c - 25.0)).exp();
        assert!(
            (hot.leakage_w - expect).abs() < 1e-6,
            "{} {expect}",
            hot.leakage_w
        );
        s.layers[0].blocks[0].leakage_w = 500.0;
        assert!(matches!(s.solve(4), Err(ThermalError::Runaway { .. })));
        s.layers[0].blocks[0].dynamic_w = f64::NAN;
        assert!(matches!(s.solve(4), Err(ThermalError::Invalid(_))));
    }

    /// Lee et al.'s plate: a source as large as the plate sees its one-dimensional
    /// resistance, and a smaller source adds spreading.
    #[test]
    fn plate_resistance_limits() {
        let (a, t, k) = (1e-4, 1e-3, 400.0);
        let one_d = t / (k * a);
        assert!((plate_resistance(a, a, t, k, 0.1) - one_d).abs() < 1e-12);
        let small = plate_resistance(a / 100.0, a, t, k, 0.1);
        assert!(small > one_d);
        // A small source on a thick plate cooled far away spreads as into a half-space:
        // 0.5/(√π·k·a) by Lee et al.'s form, within 5 % of the exact 8/(3π²·k·a).
        let pi = std::f64::consts::PI;
        let src = 1e-8;
        let a_src = (src / pi).sqrt();
        let half_space = plate_resistance(src, 1.0, 1.0, k, 1e-9);
        assert!((half_space - 0.5 / (pi.sqrt() * k * a_src)).abs() / half_space < 0.01);
        assert!((half_space * k * a_src - 8.0 / (3.0 * pi * pi)).abs() / 0.27 < 0.05);
        // HotSpot's package over 4 mm² and over seed's 47 mm² (a transcription check of the
        // formula, computed apart in Python).
        let r4 = Package::hotspot().resistance(4e-6);
        let r47 = Package::hotspot().resistance(47.337e-6);
        assert!(
            (r4 - 1.043).abs() < 0.002 && (r47 - 0.454).abs() < 0.002,
            "{r4} {r47}"
        );
    }
}
