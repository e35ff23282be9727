//! `regflash accuracy`: exp2 against f64, and the tiled hardware model against the f64 and
//! plain FP16 references.

use super::*;

#[derive(Args, Debug)]
pub struct AccuracyArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Query and key sequence length of the attention problems.
    #[arg(long, default_value_t = 512)]
    pub seq: usize,
    /// Input seed of the value patterns.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// The softmax order of the model: online (the fused designs: a running max, O and l
    /// rescaled as it grows) or two-pass (standard attention, the unfused and row-materializing
    /// baselines' order: the whole row's max first, no rescale). Default: the variant's
    /// (two-pass for rowfused, online for the others).
    #[arg(long, value_enum)]
    pub softmax: Option<SoftmaxArg>,
}

/// `--softmax`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SoftmaxArg {
    Online,
    TwoPass,
}

pub(super) fn accuracy_cmd(args: AccuracyArgs) -> Result<ExitCode> {
    use kernels::accuracy::{attention_accuracy_of, exp2_accuracy};
    use kernels::flash::{OutFormat, SoftmaxPass};
    use kernels::patterns::Pattern;
    let cfg = args.config.resolve()?;
    anyhow::ensure!(args.seq >= 1, "--seq must be at least 1");
    let order = args.softmax.unwrap_or(match cfg.variant.plan().row_keys() {
        Some(_) => SoftmaxArg::TwoPass,
        None => SoftmaxArg::Online,
    });
    println!("exp2 against f64 (every 64th binary32 input in each range)\n");
    println!("| x in | inputs | max relative error | max error (ulps) |");
    println!("|---|---:|---:|---:|");
    for (lo, hi) in [
        (-150.0, -149.0),
        (-149.0, -126.0),
        (-126.0, -24.0),
        (-24.0, 0.0),
        (0.0, 128.0),
    ] {
        let r = exp2_accuracy(lo, hi, 64);
        println!(
            "| [{lo}, {hi}) | {} | {:.3e} (2^{:.1}) | {:.2} |",
            r.points,
            r.max_rel,
            r.max_rel.log2(),
            r.max_ulps
        );
    }
    let f = cfg.in_format.short_name();
    let softmax = match (order, cfg.rescale) {
        (SoftmaxArg::TwoPass, _) => SoftmaxPass::TwoPass,
        (SoftmaxArg::Online, hdl::softmax::Rescale::Pow2) => SoftmaxPass::Online,
        (SoftmaxArg::Online, hdl::softmax::Rescale::Lazy { threshold }) => {
            SoftmaxPass::Lazy { threshold }
        }
    };
    if let Some(qk) = cfg.qk_format {
        return Ok(exit(quantized_table(&cfg, qk, &args, softmax, &f)));
    }
    println!(
        "\nhardware model ({}, {f} inputs) vs f64 reference, next to plain attention at {f} \
         storage / FP32 accumulation; seq {}, d {}, Br {}, Bc {}, {} PE columns; errors are max \
         |O - O_ref| over both output formats; the contract's relative limit is {:e}\n",
        match order {
            SoftmaxArg::TwoPass => "two-pass softmax".to_string(),
            SoftmaxArg::Online => format!("online softmax, rescale {}", cfg.rescale),
        },
        args.seq,
        cfg.head_dim,
        cfg.br,
        cfg.bc,
        cfg.cols,
        kernels::accuracy::max_rel_err(cfg.in_format)
    );
    println!("| pattern | causal | hw error | plain {f} error | hw / plain | hw / max|V| | hw / max|O_ref| | contract |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    let mut ok = true;
    for pattern in Pattern::ALL {
        for causal in [false, true] {
            let model = model_config(&cfg, causal, OutFormat::Short, softmax);
            let a = attention_accuracy_of(pattern, args.seq, args.seq, &model, args.seed);
            let verdict = a.check();
            ok &= verdict.is_ok();
            let ratio = if a.plain_err > 0.0 {
                format!("{:.2}", a.max_abs_err / a.plain_err)
            } else {
                "-".into()
            };
            println!(
                "| {pattern:?} | {causal} | {:.3e} | {:.3e} | {ratio} | {:.2e} | {:.2e} | {} |",
                a.max_abs_err,
                a.plain_err,
                a.rel_err(),
                a.max_abs_err / a.out_scale.max(f64::MIN_POSITIVE),
                verdict.map_or_else(|e| format!("**FAIL**: {e}"), |_| "met".into())
            );
        }
    }
    Ok(exit(ok))
}

/// Integer QKᵀ: per pattern, the hardware model on Q and K quantized as the design reads them,
/// against f64 attention on the original Q and K (the quantization's error with the
/// arithmetic's) and on the quantized values (the arithmetic's, which the contract's relative
/// limit bounds). Non-finite Q or K cannot be quantized: refused by name.
fn quantized_table(
    cfg: &CoreConfig,
    qk: kernels::quant::QkFormat,
    args: &AccuracyArgs,
    softmax: kernels::flash::SoftmaxPass,
    f: &str,
) -> bool {
    use kernels::flash::OutFormat;
    use kernels::patterns::Pattern;
    let limit = kernels::accuracy::max_rel_err(cfg.in_format);
    println!(
        "\nhardware model ({} QK, {f} P·V, {softmax:?} softmax, rescale {}) vs f64 attention on the \
         original and on the quantized Q and K (Q per token, K per block of Bc keys after \
         smoothing); seq {}, d {}, Br {}, Bc {}; errors are max |O - O_ref| / max |V| at FP32 \
         output; the contract bounds the arithmetic's at {limit:e}\n",
        qk.name().to_uppercase(),
        cfg.rescale,
        args.seq,
        cfg.head_dim,
        cfg.br,
        cfg.bc
    );
    println!("| pattern | causal | vs f64, original Q, K | vs f64, quantized Q, K | contract |");
    println!("|---|---|---:|---:|---|");
    let mut ok = true;
    for pattern in Pattern::ALL {
        for causal in [false, true] {
            let model = model_config(cfg, causal, OutFormat::F32, softmax);
            match kernels::accuracy::quant_accuracy(
                pattern, args.seq, args.seq, &model, qk, args.seed,
            ) {
                Ok(a) => {
                    let met = a.rel_err_dequantized <= limit;
                    ok &= met;
                    println!(
                        "| {pattern:?} | {causal} | {:.3e} | {:.3e} | {} |",
                        a.rel_err,
                        a.rel_err_dequantized,
                        if met { "met" } else { "**FAIL**" }
                    );
                }
                Err(e) => println!("| {pattern:?} | {causal} | - | - | refused: {e} |"),
            }
        }
    }
    ok
}

/// The hardware model of `cfg`'s tiling for one mask, output format and softmax order.
fn model_config(
    cfg: &CoreConfig,
    causal: bool,
    out: kernels::flash::OutFormat,
    softmax: kernels::flash::SoftmaxPass,
) -> kernels::flash::FlashConfig {
    kernels::flash::FlashConfig {
        br: cfg.br as usize,
        bc: cfg.bc as usize,
        head_dim: cfg.head_dim as usize,
        cols: cfg.cols as usize,
        causal,
        out,
        softmax,
        operand: cfg.in_format,
    }
}
