//! The sandbox helper of the tests' hosts (`sandbox_helper` in their
//! configuration): a test binary runs the test harness first, so it cannot
//! be its own helper; the tests name this one instead, as an embedder
//! names an installed `airlock`.

fn main() {
    airlock_native::serve_if_asked();
    eprintln!("sandbox_helper: started without a plan; Airlock's hosts run it");
    std::process::exit(2);
}
