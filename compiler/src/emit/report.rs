//! `bundlec compile --report FILE.html`: one self-contained HTML page (inline CSS and SVG, no scripts, no external
//! files) describing a build: a summary, the compile timings, the per-op table (kernel, ONNX node and op, device,
//! BSP layer, tasks, estimated time from the cost model's host rates, bytes moved, fused epilogue), the memory plan
//! as an SVG timeline (every activation buffer a bar over the layers it is live in, at its offset, so gaps and
//! fragmentation are visible) and the partition as an SVG graph (nodes in topological depth columns, coloured by
//! device, with their data edges).

use super::segments::SegmentLayout;
use crate::ir::{numel, Graph, NodeId, Op};
use crate::kernel::{Buf, Lowering};
use crate::npu::NpuTarget;
use crate::plan::{MemoryPlan, Schedule};
use std::collections::HashMap;
use std::fmt::Write;

/// Everything the report shows.
pub struct ReportInput<'a> {
    /// Bundle name.
    pub name: &'a str,
    /// The model file.
    pub model: &'a str,
    /// Optimised graph.
    pub g: &'a Graph,
    /// Kernels.
    pub l: &'a Lowering,
    /// Schedule.
    pub s: &'a Schedule,
    /// Memory plan.
    pub plan: &'a MemoryPlan,
    /// NPU segments placed in the bundle.
    pub segments: &'a [SegmentLayout],
    /// Node → segment id, for nodes on the NPU.
    pub on_npu: HashMap<NodeId, String>,
    /// The target whose host rates estimate CPU time (the `--npu` target, or the virtual NPU's).
    pub target: &'a NpuTarget,
    /// (stage, milliseconds).
    pub timings: &'a [(&'static str, f64)],
    /// Target triple and `--cpu`.
    pub cpu: [&'a str; 2],
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Multiply-accumulates of a product node (0 for others): output elements × the reduction length.
pub fn node_macs(g: &Graph, n: NodeId) -> u64 {
    let node = &g.nodes[n];
    let out = numel(&g.tensors[node.outputs[0]].shape) as u64;
    let dims = |i: usize| node.inputs.get(i).map(|&t| g.tensors[t].shape.clone());
    let k = match &node.op {
        Op::Conv(_) | Op::QConv(..) => dims(1).map_or(0, |w| w[1..].iter().product::<usize>()),
        Op::MatMul(_) | Op::QMatMul(_) => dims(0).and_then(|a| a.last().copied()).unwrap_or(0),
        Op::Gemm(a) => dims(0).map_or(0, |x| if a.trans_a { x[0] } else { x[x.len() - 1] }),
        _ => 0,
    };
    out.saturating_mul(k as u64)
}

fn fused(op: &Op) -> String {
    let epi = match op {
        Op::Conv(a) => Some(a.epilogue),
        Op::MatMul(e) => Some(*e),
        Op::Gemm(a) => Some(a.epilogue),
        _ => None,
    };
    let Some(e) = epi else { return String::new() };
    let mut v = Vec::new();
    if e.scale != 1.0 {
        v.push(format!("scale {}", e.scale));
    }
    if e.bias {
        v.push("bias Add".to_string());
    }
    if e.residual {
        v.push("residual Add".to_string());
    }
    match e.act {
        crate::ir::Activation::None => {}
        crate::ir::Activation::Relu => v.push("Relu".into()),
        crate::ir::Activation::Clip(lo, hi) => v.push(format!("Clip({lo}, {hi})")),
    }
    v.join(" + ")
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:13px}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#eee}td.n{text-align:right}\
tr.npu td{background:#e8f1ff}h2{margin-top:1.6em}.svgbox{overflow:auto;border:1px solid #ccc;max-height:720px}\
.k{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}";

/// Renders the page.
pub fn render(r: &ReportInput) -> String {
    let mut h = String::new();
    let total_ms: f64 = r.timings.iter().map(|t| t.1).sum();
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>bundlec report: {n}</title><style>{CSS}</style></head><body>\
         <h1>bundle {n}</h1><p>model {m}; target {t} (cpu {c}); {nodes} nodes &rarr; {k} kernels in {layers} BSP layers; \
         {segs} NPU segment(s); compiled in {total_ms:.0} ms.</p>",
        n = esc(r.name),
        m = esc(r.model),
        t = esc(r.cpu[0]),
        c = esc(r.cpu[1]),
        nodes = r.g.order.len(),
        k = r.l.kernels.len(),
        layers = r.s.num_layers,
        segs = r.segments.len()
    );
    let p = r.plan;
    let _ = write!(
        h,
        "<p>areas: constant {} B, mutable {} B, activations {} B; max live {} B; planner efficiency {:.3}.</p>",
        p.constant_size,
        p.mutable_size,
        p.activation_size,
        p.max_live,
        p.efficiency()
    );
    h.push_str("<h2>Compile timings</h2><table><tr><th>stage</th><th>ms</th></tr>");
    for (stage, ms) in r.timings {
        let _ = write!(h, "<tr><td>{stage}</td><td class=n>{ms:.1}</td></tr>");
    }
    h.push_str("</table>");
    op_table(&mut h, r);
    memory_svg(&mut h, r);
    partition_svg(&mut h, r);
    h.push_str("</body></html>\n");
    h
}

fn op_table(h: &mut String, r: &ReportInput) {
    let g = r.g;
    h.push_str(
        "<h2>Ops</h2><p>In schedule order. Estimated time: the node's multiply-accumulates (or elements) at the \
         target description's host rates; NPU rows run as part of their segment's transaction (their CPU \
         fallback kernel is listed).</p><table><tr><th>layer</th><th>kernel</th><th>ONNX node</th><th>op</th>\
         <th>device</th><th>tasks</th><th>MACs</th><th>est. &micro;s</th><th>bytes moved</th><th>fused</th></tr>",
    );
    let mut seen = std::collections::HashSet::new();
    for &ki in &r.s.order {
        let k = &r.l.kernels[ki];
        let node = &g.nodes[k.node];
        let dev = r.on_npu.get(&k.node).cloned();
        let bytes: usize = k
            .args
            .iter()
            .filter_map(|a| r.plan.loc.get(&a.buf))
            .map(|l| l.size)
            .sum();
        let first = seen.insert(k.node);
        let (macs, est) = if first {
            let macs = node_macs(g, k.node);
            let cyc = crate::partition::cost::cpu_cycles(g, k.node, macs, r.target);
            let shown = if macs > 0 {
                macs.to_string()
            } else {
                String::new()
            };
            (
                shown,
                format!("{:.1}", crate::partition::cost::us(cyc, r.target)),
            )
        } else {
            (String::new(), String::new())
        };
        let _ = write!(
            h,
            "<tr{cls}><td class=n>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td>\
             <td class=n>{macs}</td><td class=n>{est}</td><td class=n>{bytes}</td><td>{}</td></tr>",
            r.s.layer[ki],
            esc(&k.name),
            esc(&node.name),
            esc(&node.onnx_op),
            dev.as_deref().map_or("CPU".to_string(), |s| format!("NPU {}", esc(s))),
            k.tasks,
            if first { fused(&node.op) } else { String::new() },
            cls = if dev.is_some() { " class=npu" } else { "" },
        );
    }
    h.push_str("</table>");
}

/// Every activation buffer with its offset, size and `(first, last)` layers, as the planner kept them apart
/// (`MemoryPlan::live`), ordered by first layer then offset; the NPU segments' staging buffers are named after
/// their segment.
fn liveness(r: &ReportInput) -> Vec<(String, usize, usize, u32, u32)> {
    let staging: HashMap<(usize, usize), String> = r
        .segments
        .iter()
        .flat_map(|sg| {
            ["in", "out", "scratch"]
                .iter()
                .zip(&sg.staging)
                .map(move |(what, loc)| ((loc.offset, loc.size), format!("{} {what}", sg.id)))
        })
        .collect();
    let mut v: Vec<_> = r
        .plan
        .live
        .iter()
        .filter_map(|(&b, &(first, last))| {
            let loc = r.plan.loc[&b];
            let name = match b {
                Buf::Tensor(t) => r.g.tensors[t].name.clone(),
                Buf::Scratch(_) if loc.size == 0 => return None,
                Buf::Scratch(i) => staging
                    .get(&(loc.offset, loc.size))
                    .cloned()
                    .unwrap_or_else(|| format!("scratch #{i}")),
            };
            Some((name, loc.offset, loc.size, first, last))
        })
        .collect();
    v.sort_by(|a, b| (a.3, a.1, &a.0).cmp(&(b.3, b.1, &b.0)));
    v
}

fn memory_svg(h: &mut String, r: &ReportInput) {
    let bufs = liveness(r);
    let layers = r.s.num_layers.max(1) as f64;
    let area = r.plan.activation_size.max(1) as f64;
    let (w, ht) = (1100.0, 480.0);
    let _ = write!(
        h,
        "<h2>Memory plan</h2><p>Activation area ({} B) over the {} BSP layers: each bar is one buffer, live from the \
         first to the last layer that uses it, at its offset (bottom = 0). White space inside the area is \
         fragmentation; the area's height over the tallest live stack is 1 / efficiency.</p>\
         <div class=svgbox><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" \
         viewBox=\"0 0 {w} {}\"><rect x=\"40\" y=\"10\" width=\"{}\" height=\"{ht}\" fill=\"#fafafa\" stroke=\"#999\"/>",
        r.plan.activation_size,
        r.s.num_layers,
        ht + 40.0,
        ht + 40.0,
        w - 50.0
    );
    let sx = (w - 50.0) / layers;
    let sy = ht / area;
    for (i, (name, off, size, f, t)) in bufs.iter().enumerate() {
        let x = 40.0 + *f as f64 * sx;
        let bw = ((*t - *f + 1) as f64 * sx).max(1.0);
        let y = 10.0 + ht - (*off + *size) as f64 * sy;
        let bh = (*size as f64 * sy).max(0.5);
        let hue = (i * 47) % 360;
        let _ = write!(
            h,
            "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{bw:.2}\" height=\"{bh:.2}\" fill=\"hsl({hue},60%,65%)\" \
             stroke=\"#555\" stroke-width=\"0.3\"><title>{} : {size} B at {off}, layers {f}..{t}</title></rect>",
            esc(name)
        );
    }
    let _ = write!(
        h,
        "<text x=\"40\" y=\"{}\" font-size=\"12\">layer 0</text><text x=\"{}\" y=\"{}\" font-size=\"12\" \
         text-anchor=\"end\">layer {}</text></svg></div>",
        ht + 30.0,
        w - 10.0,
        ht + 30.0,
        r.s.num_layers.saturating_sub(1)
    );
}

fn partition_svg(h: &mut String, r: &ReportInput) {
    let g = r.g;
    let mut depth: HashMap<NodeId, usize> = HashMap::new();
    let producer: HashMap<_, _> = g
        .order
        .iter()
        .flat_map(|&n| g.nodes[n].outputs.iter().map(move |&t| (t, n)))
        .collect();
    for &n in &g.order {
        let d = g.nodes[n]
            .inputs
            .iter()
            .filter_map(|t| producer.get(t).and_then(|p| depth.get(p)))
            .max()
            .map_or(0, |d| d + 1);
        depth.insert(n, d);
    }
    let mut rows: HashMap<usize, usize> = HashMap::new();
    let mut pos: HashMap<NodeId, (f64, f64)> = HashMap::new();
    for &n in &g.order {
        let d = depth[&n];
        let row = rows.entry(d).or_insert(0);
        pos.insert(n, (20.0 + d as f64 * 130.0, 20.0 + *row as f64 * 34.0));
        *row += 1;
    }
    let width = 20.0 + (depth.values().max().copied().unwrap_or(0) + 1) as f64 * 130.0;
    let height = 40.0 + rows.values().max().copied().unwrap_or(1) as f64 * 34.0;
    let _ = write!(
        h,
        "<h2>Partition</h2><p><span class=k style=\"background:#7fb0ff\"></span>NPU \
         <span class=k style=\"background:#ddd\"></span>CPU. Columns are topological depth; hover a node for its \
         name.</p><div class=svgbox><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\">"
    );
    for &n in &g.order {
        let (x, y) = pos[&n];
        for t in &g.nodes[n].inputs {
            if let Some((px, py)) = producer.get(t).and_then(|p| pos.get(p)) {
                let _ = write!(
                    h,
                    "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#888\" stroke-width=\"0.8\"/>",
                    px + 110.0,
                    py + 12.0,
                    y + 12.0
                );
            }
        }
    }
    for &n in &g.order {
        let (x, y) = pos[&n];
        let node = &g.nodes[n];
        let fill = if r.on_npu.contains_key(&n) {
            "#7fb0ff"
        } else {
            "#ddd"
        };
        let mut label: String = node.onnx_op.chars().take(16).collect();
        if let Some(sg) = r.on_npu.get(&n) {
            label = format!("{label} [{sg}]");
        }
        let _ = write!(
            h,
            "<g><title>{} ({})</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"110\" height=\"24\" rx=\"4\" \
             fill=\"{fill}\" stroke=\"#444\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text></g>",
            esc(&node.name),
            esc(&node.onnx_op),
            x + 5.0,
            y + 16.0,
            esc(&label)
        );
    }
    h.push_str("</svg></div>");
}
