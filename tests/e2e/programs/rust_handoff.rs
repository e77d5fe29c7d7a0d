// Two Rust threads hand a token back and forth through std's Mutex and
// Condvar (futexes made with syscall(2) underneath), each computing on a
// line of its own, for SECONDS of wall time. Prints a checksum-free line.
// Usage: rust_handoff SECONDS
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

// Each spinning loop is written out where it runs, on one line, so that its
// samples are its own (a shared function's would all fall on the function's
// lines). Plain operators (built with -C overflow-checks=off) and an empty
// asm keep the chain in a register: the wrapping_* methods and black_box are
// std code, inlined, whose samples would fall on lines of std's source.
fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let state = Arc::new((Mutex::new(0u32), Condvar::new())); // 0: A's turn, 1: B's, 2: stop
    let s2 = Arc::clone(&state);
    let b = thread::spawn(move || {
        let (m, c) = &*s2;
        let mut y = 104729u64;
        loop {
            let mut turn = c.wait_while(m.lock().unwrap(), |t| *t == 0).unwrap();
            if *turn == 2 {
                break;
            }
            for _ in 0..1_000_000u64 { y = y * 6364136223846793005 + 1442695040888963407; unsafe { std::arch::asm!("/* {0} */", inout(reg) y) }; } // RUST_B
            *turn = 0;
            c.notify_all();
        }
        y
    });
    let (m, c) = &*state;
    let mut x = 7919u64;
    loop {
        for _ in 0..2_000_000u64 { x = x * 6364136223846793005 + 1442695040888963407; unsafe { std::arch::asm!("/* {0} */", inout(reg) x) }; } // RUST_A
        let stop = Instant::now() >= end;
        let mut turn = m.lock().unwrap();
        *turn = if stop { 2 } else { 1 };
        c.notify_all();
        if stop {
            break;
        }
        drop(c.wait_while(turn, |t| *t == 1).unwrap());
    }
    let y = b.join().unwrap();
    println!("rust handoff done {}", (x ^ y) & 0);
}
