use throughput_optimizer::hardware::kernels::packed;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let t0 = std::time::Instant::now();
    let t = packed::from_compressed(&bytes).unwrap();
    println!("load {:?}", t0.elapsed());
    for (id, g) in t.tables() { println!("{id}: {} points", g.points().len()); }
}
