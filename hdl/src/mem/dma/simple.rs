//! The simple memory port: round-robin arbitration, a tag FIFO of reads in flight, in-order
//! responses.

use super::channel::{count_in_flight, lowest_set, Channel};
use super::DmaConfig;
use crate::{addr_bits, cat, mux, mux_index, ModuleBuilder, RegHandle, Sig};

/// What the memory port does for the channels each cycle: the request walkers' steps (the read
/// channels Q, K, V (X), then O), the read responses by read channel, bus errors by channel
/// (AXI4), the O channel's end (AXI4: every write response back), the beats read and written,
/// the response data, and whether nothing is in flight.
pub(super) struct PortSteps {
    pub(super) steps: Vec<Sig>,
    pub(super) responses: Vec<Sig>,
    pub(super) bus_errors: Option<Vec<Sig>>,
    pub(super) o_done: Option<Sig>,
    pub(super) read_beat: Sig,
    pub(super) write_beat: Sig,
    pub(super) rsp_data: Sig,
    /// The O channel's write data (the staging buffer's read of its current beat).
    pub(super) wdata: Sig,
    pub(super) quiet: Sig,
}

/// The simple port: round robin among the channels with a request, one beat per request;
/// reads also need room in the tag FIFO (`max_outstanding` reads in flight), which records
/// which channel each (in-order) response belongs to. `hold` stops new requests.
pub(super) fn simple_port(
    m: &mut ModuleBuilder,
    cfg: &DmaConfig,
    chans: &[Channel],
    hold: Sig,
) -> PortSteps {
    let w = cfg.width;
    let mem_req_ready = m.input("mem_req_ready", 1);
    let mem_rsp_valid = m.input("mem_rsp_valid", 1);
    let depth = cfg.max_outstanding;
    let pw = addr_bits(depth) + 1;
    let head = m.reg("tag_head", pw, Some(0));
    let tail = m.reg("tag_tail", pw, Some(0));
    // The reads in flight (tail less head), counted in a register of their own so that the
    // arbitration's room is a compare of a register.
    let in_flight = m.reg("tag_in_flight", pw, Some(0));
    let depth_lit = m.lit(pw, depth as u64);
    let room = in_flight.q.lt(depth_lit);
    let room = m.name("tag_room", room);
    // The read channels first, the write channel (O) last. `hold` gates the request's valid,
    // not the arbitration, so the address does not wait on it.
    let reads = chans.len() - 1;
    let reqs: Vec<Sig> = chans
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i < reads {
                c.req_valid & room
            } else {
                c.req_valid
            }
        })
        .collect();
    let (any_req, grant, rr) = round_robin(m, "rr", &reqs);
    let any_req = any_req & !hold;
    let accept = any_req & mem_req_ready;
    let accept = m.name("accept", accept);
    m.set_enable(rr, accept);
    let is_write = grant.eq(reads as u64);
    let addrs: Vec<Sig> = chans.iter().map(|c| c.req_addr.q).collect();
    let addr = mux_index(grant, &addrs);
    let wdata = m.input("o_rd_data", w);
    m.output("mem_req_valid", any_req);
    m.output("mem_req_addr", addr);
    m.output("mem_req_write", is_write);
    m.output("mem_req_wdata", wdata);
    // Tag FIFO push on accepted reads, pop on responses.
    let is_read = !is_write;
    let push = accept & is_read;
    let tags = m.memory("tags", depth, grant.width());
    let tail_idx = tail.q.trunc(pw - 1);
    m.mem_write(tags, push, tail_idx, grant);
    let tail_inc = tail.q + 1;
    m.set_next(tail, tail_inc);
    m.set_enable(tail, push);
    let head_idx = head.q.trunc(pw - 1);
    // The head's entry in a register of its own (show-ahead): each cycle it takes the entry
    // the head will point at, as it will be after this cycle's push, so a response's channel
    // is a compare of a register, not of a depth-to-1 read in series with the landing write.
    let head_inc = head.q + 1;
    let stay = m.mem_read(tags, head_idx);
    let moved = m.mem_read(tags, head_inc.trunc(pw - 1));
    let read = mux(mem_rsp_valid, moved, stay);
    // Where the head will be is the push's entry only in a FIFO that will be empty (a full one
    // takes no push): none in flight, or one and it comes back now.
    let at_tail = mux(mem_rsp_valid, in_flight.q.eq(1), in_flight.q.is_zero());
    let rsp_tag = m.reg("rsp_tag", grant.width(), Some(0));
    m.set_next(rsp_tag, mux(push & at_tail, grant, read));
    let rsp_tag = rsp_tag.q;
    m.set_next(head, head_inc);
    m.set_enable(head, mem_rsp_valid);
    count_in_flight(m, in_flight, (push, mem_rsp_valid), None);
    let steps: Vec<Sig> = (0..chans.len())
        .map(|i| {
            let granted = grant.eq(i as u64);
            accept & granted
        })
        .collect();
    let responses: Vec<Sig> = (0..reads)
        .map(|i| mem_rsp_valid & rsp_tag.eq(i as u64))
        .collect();
    PortSteps {
        steps,
        responses,
        bus_errors: None,
        o_done: None,
        read_beat: push,
        write_beat: accept & is_write,
        rsp_data: m.input("mem_rsp_data", w),
        wdata,
        quiet: in_flight.q.is_zero(),
    }
}

/// Round robin from register `name` (the channel after the last grant) among the requests
/// (4, or 8 with more than 4 channels): (any request, the grant, the register, which the
/// caller enables on an accepted grant).
pub(super) fn round_robin(
    m: &mut ModuleBuilder,
    name: &str,
    reqs: &[Sig],
) -> (Sig, Sig, RegHandle) {
    let n = reqs.len().max(4).next_power_of_two();
    let mut bits = reqs.to_vec();
    while bits.len() < n {
        bits.push(m.zero(1));
    }
    bits.reverse();
    let req_vec = cat(&bits);
    let req_vec = m.name(&format!("{name}_requests"), req_vec);
    let rr = m.reg(name, addr_bits(n as u32), Some(0));
    let ones = m.ones(n as u32);
    let at_or_above = ones << rr.q;
    let upper = req_vec & at_or_above;
    let (upper_any, upper_idx) = lowest_set(m, upper);
    let (any_req, lowest_idx) = lowest_set(m, req_vec);
    let grant = mux(upper_any, upper_idx, lowest_idx);
    let grant = m.name(&format!("{name}_grant"), grant);
    let grant_next = grant + 1;
    m.set_next(rr, grant_next);
    (any_req, grant, rr)
}
