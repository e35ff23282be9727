//! DMA bandwidth: the memory port's achieved bytes per cycle against its peak while K and V
//! (4,096 rows of 256 B each, blocks of 64 rows) stream through their double buffers, for
//! 256- and 512-bit ports, for memory latencies of 1, 20 and 100 cycles, with a
//! consumer that releases each block at once (raw bandwidth) and one that holds it for the
//! seed array's compute time per block (1,024 cycles: QK^T and PV of a 64x64 block on 32x32
//! PEs). Cycle counts from the RTL under Verilator against the memory model; deterministic.
//!
//!     cargo bench --bench dma_bandwidth

use hdl::config::CoreConfig;
use regflash::design::{simulate, Target};
use regflash::verify::dma::{Desc, DmaBench, ReadJob};
use verilator_tb::memory::MemoryConfig;

fn main() {
    println!("| port | latency | consumer hold per block | cycles | bytes | B/cycle | of peak | consumer waits after block 0 | first-block wait |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for width in [256u32, 512] {
        let mut cfg = CoreConfig::preset("seed").unwrap();
        cfg.addr_bits = 24;
        cfg.mem_width = width;
        let (model, _) = simulate(&cfg, &Target::Unit("dma".into())).unwrap();
        let d = cfg.dma();
        let beat = d.beat_bytes() as u64;
        let row_bytes = cfg.head_dim as u64 * 2;
        let seq = 4096u64;
        for latency in [1u32, 20, 100] {
            for hold in [0u32, 1024] {
                let mem = MemoryConfig::simple(1 << 24, beat as usize, latency);
                let mut b = DmaBench::new(&model, &d, mem).unwrap();
                for (ch, base) in [(1usize, 0u64), (2, 1 << 22)] {
                    let desc = Desc {
                        base,
                        stride: row_bytes,
                        row_bytes,
                        rows: seq,
                        block_rows: cfg.bc as u64,
                    };
                    b.start_read(ch, ReadJob { desc, hold }).unwrap();
                }
                b.run_to_idle(10_000_000).unwrap();
                let r = b.counters();
                let bytes = r.memory.bytes_read;
                let rate = bytes as f64 / r.cycles as f64;
                println!(
                    "| {width} bit | {latency} | {hold} | {} | {bytes} | {rate:.2} | {:.1} % | {} | {} |",
                    r.cycles,
                    100.0 * rate / beat as f64,
                    r.wait[1] + r.wait[2],
                    r.first_wait[1].max(r.first_wait[2])
                );
            }
        }
    }
}
