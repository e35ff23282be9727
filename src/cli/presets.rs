//! `regflash presets`: the presets with their derived figures.

use super::*;

pub(super) fn presets_cmd() -> Result<()> {
    println!(
        "| preset | PEs | Br x Bc x d | rows x keys x O columns per PE | registers/PE used | \
         register file | S + O_acc | MAC steps per block (QK + PV) | K/V block | MACs per K/V byte \
         | MAC latency |"
    );
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for name in PRESETS {
        let c = CoreConfig::preset(name)?;
        let p = hdl::core::CoreParams::from_config(&c)?;
        let (qk, pv) = p.block_steps();
        let kv_bytes = 2 * 2 * c.bc as u64 * c.head_dim as u64;
        let block_macs = 2 * c.br as u64 * c.bc as u64 * c.head_dim as u64;
        println!(
            "| {name} | {}x{} = {} | {}x{}x{} | {} x {} x {} | {} of {} | {} KiB | {:.1} KiB ({:.0} %) \
             | {} + {} | {} | {:.0} | {} |",
            c.rows,
            c.cols,
            c.pes(),
            c.br,
            c.bc,
            c.head_dim,
            p.row.a,
            p.row.b,
            p.row.e,
            p.row.regs_needed(),
            c.regs_per_pe,
            c.register_bytes() / 1024,
            c.register_bytes_needed() as f64 / 1024.0,
            100.0 * c.register_bytes_needed() as f64 / c.register_bytes() as f64,
            qk,
            pv,
            if kv_bytes >= 1024 {
                format!("{} KiB", kv_bytes / 1024)
            } else {
                format!("{kv_bytes} B")
            },
            block_macs as f64 / kv_bytes as f64,
            c.mul_latency + c.add_latency + 1,
        );
    }
    Ok(())
}
