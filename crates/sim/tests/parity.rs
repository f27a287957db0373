//! Sim/live parity: a policy decides the same for the same view, whether
//! the view comes from the simulator or from a live sensor. The live side
//! here is the engine's `Replay` world, which serves the simulator's
//! recorded snapshots through the same Sensor/Actuator/Clock traits.

use herd_engine::{Config, NoMeter, replay::Replay};
use herd_policy::{Estimates, Plan, Snapshot};
use herd_sim::Scenario;

const SCENARIO: &str = r#"
[machine]
synthetic = "package:2 l3:1 core:4 pu:2"
[[job]]
name = "stream"
threads = 3
[[job.phase]]
instructions = 2e9
ipc = 0.6
bw_gbps = 3.0
[[job]]
name = "loop"
threads = 2
arrival_s = 0.2
[[job.phase]]
instructions = 3e9
ipc = 1.5
"#;

#[test]
fn policies_decide_the_same_on_replayed_views() {
    let mut s = Scenario::parse(SCENARIO, "parity.toml", &|_| Err("none".into())).unwrap();
    // The policies' own decisions: the guard's probes are not replayed.
    s.guard = false;
    let solo = herd_sim::solo_times(&s);
    for policy in ["linux", "static:compact", "static:scatter:places=cores"] {
        // Simulation: record every view's snapshot and every plan.
        let mut recorded: Vec<(Snapshot, Plan)> = Vec::new();
        let spec = policy.parse().unwrap();
        herd_sim::run_policy::<NoMeter>(&s, &spec, 7, &solo, None, false, |view, plan| {
            recorded.push((view.snapshot.clone(), plan.clone()));
        })
        .unwrap();
        assert!(recorded.len() > 10, "{policy}: a real run");
        // "Live": a fresh policy object fed the same snapshots.
        let mut live = Replay::new(recorded.iter().map(|(s, _)| s.clone()).collect());
        let mut fresh = herd_policy::build(policy).unwrap();
        let cfg = Config::with_period(s.period_ns, 7);
        let mut live_plans = Vec::new();
        herd_engine::run(
            fresh.as_mut(),
            &s.machine,
            &Estimates::new(),
            None,
            &mut live,
            &mut NoMeter,
            &cfg,
            |_, p| live_plans.push(p.clone()),
        );
        let sim_plans: Vec<Plan> = recorded.into_iter().map(|(_, p)| p).collect();
        assert_eq!(live_plans, sim_plans, "{policy}: same views, same plans");
        assert_eq!(live.applied, sim_plans, "{policy}: the actuator got them");
        if policy != "linux" {
            assert!(
                sim_plans.iter().any(|p| !p.tasks.is_empty()),
                "{policy} placed something"
            );
        }
    }
}
