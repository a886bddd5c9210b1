//! Gardener's request budget: however many Runtimes the host works on, its requests to
//! Gardener keep the pace `--gardener-requests-per-second` sets, and every Runtime still
//! gets Ready (requests wait their turn, nothing fails for it).

use tessera_tests::probe::busiest_second;

use super::{ControlPlane, Result, RuntimeState, Scenario};

const SHOOTS: [&str; 3] = ["budget-a", "budget-b", "budget-c"];

pub(super) async fn gardener_budget(cp: &ControlPlane) -> Result {
    let s = Scenario::new(cp, "t-budget").await;
    let host = s.host("a", &["--gardener-requests-per-second", "2"]);
    for shoot in SHOOTS {
        s.create(&s.manifest(&format!("rt-{shoot}"), shoot)).await?;
    }
    for shoot in SHOOTS {
        s.wait_state(&format!("rt-{shoot}"), RuntimeState::Ready, &host)
            .await?;
    }
    let stats = cp.sim_stats();
    let mut times: Vec<i64> = SHOOTS
        .iter()
        .flat_map(|shoot| {
            stats["byObject"][format!("shoot/{shoot}")]["arrivals"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|t| t.as_i64())
        .collect();
    let requests = times.len();
    let busiest = busiest_second(&mut times);
    let span = times.last().zip(times.first()).map_or(0, |(l, f)| l - f);
    println!(
        "gardener_budget: {requests} Shoot requests over {:.1} s, at most {busiest} in one second",
        span as f64 / 1000.0
    );
    // A request every half second leaves the host (two a second); arrivals may bunch by a
    // little, never by four (without a budget, a dozen arrive within one second).
    if requests < 2 * SHOOTS.len() || busiest > 3 {
        return Err(format!(
            "{requests} Shoot requests, {busiest} of them within one second: {times:?}"
        ));
    }
    Ok(())
}
