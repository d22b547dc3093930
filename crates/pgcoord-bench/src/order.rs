//! How far an order of service departs from the arrival order: inversions,
//! largest displacement, exactly in order or not; per round and over the
//! rounds (the `semaphore_fifo*` scenarios).

use serde_json::{json, Map, Value};

use crate::ctx::ScenarioReport;
use crate::report::spread;

/// One round: who was served in which place (arrival indices, in grant
/// order) and on which manager each arrival sat (`None`: the head's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub served: Vec<usize>,
    pub managers: Vec<Option<usize>>,
}

impl Order {
    pub fn of(served: Vec<usize>, managers: Vec<Option<usize>>) -> Self {
        Self { served, managers }
    }

    /// Pairs served the other way round from their arrival (Kendall's
    /// distance to the arrival order): 0 in order, n(n-1)/2 reversed.
    pub fn inversions(&self) -> usize {
        inversions(&self.served)
    }

    /// Inversions against the order [`one_wait_per_manager`] predicts:
    /// what the managers' taking turns does not explain.
    pub fn inversions_beyond_turns(&self) -> usize {
        let predicted = one_wait_per_manager(&self.managers);
        let mut place = vec![0; predicted.len()];
        for (p, &i) in predicted.iter().enumerate() {
            place[i] = p;
        }
        inversions(&self.served.iter().map(|&i| place[i]).collect::<Vec<_>>())
    }

    /// The largest |grant place - arrival place| of any waiter.
    pub fn max_displacement(&self) -> usize {
        self.served
            .iter()
            .enumerate()
            .map(|(place, &arrival)| place.abs_diff(arrival))
            .max()
            .unwrap_or(0)
    }

    pub fn in_order(&self) -> bool {
        self.served.iter().copied().eq(0..self.served.len())
    }

    /// Whether it is the order [`one_wait_per_manager`] predicts.
    pub fn as_one_wait_per_manager(&self) -> bool {
        self.served == one_wait_per_manager(&self.managers)
    }
}

/// Pairs `a < b` with `s[a] > s[b]`.
fn inversions(s: &[usize]) -> usize {
    (0..s.len())
        .map(|a| (a + 1..s.len()).filter(|&b| s[a] > s[b]).count())
        .sum()
}

/// The order of service when each manager has one wait queued in
/// PostgreSQL's FIFO queue and serves its own waiters in arrival order:
/// the managers in the order their first waiter arrived, and a manager
/// whose wait was granted queues again at the end, behind the others
/// (`docs/architecture.md`, Fairness). So the managers take turns.
pub fn one_wait_per_manager(managers: &[Option<usize>]) -> Vec<usize> {
    use std::collections::{BTreeMap, VecDeque};
    let mut lines: BTreeMap<Option<usize>, VecDeque<usize>> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for (i, m) in managers.iter().enumerate() {
        let line = lines.entry(*m).or_default();
        if line.is_empty() {
            queue.push_back(*m);
        }
        line.push_back(i);
    }
    let mut served = Vec::with_capacity(managers.len());
    while let Some(m) = queue.pop_front() {
        let line = lines.get_mut(&m).expect("a queued manager has a line");
        served.extend(line.pop_front());
        if !line.is_empty() {
            queue.push_back(m);
        }
    }
    served
}

/// The figures over all rounds: the fraction in exact order, inversions and
/// displacements per round (all, and min / median / max), and the rounds
/// that were out of order (with their managers).
pub fn summary(orders: &[Order]) -> Map<String, Value> {
    let rounds = orders.len().max(1) as f64;
    let mut inv: Vec<f64> = orders.iter().map(|o| o.inversions() as f64).collect();
    let mut disp: Vec<f64> = orders.iter().map(|o| o.max_displacement() as f64).collect();
    let mut beyond: Vec<f64> = orders
        .iter()
        .map(|o| o.inversions_beyond_turns() as f64)
        .collect();
    let per_round = json!({
        "inversions": inv,
        "max_displacement": disp,
        "inversions_beyond_turns": beyond,
    });
    inv.sort_by(f64::total_cmp);
    beyond.sort_by(f64::total_cmp);
    disp.sort_by(f64::total_cmp);
    let in_order = orders.iter().filter(|o| o.in_order()).count();
    let predicted = orders
        .iter()
        .filter(|o| o.as_one_wait_per_manager())
        .count();
    let n = orders.first().map_or(0, |o| o.served.len());
    let mut m = Map::new();
    m.insert("trials".into(), json!(orders.len()));
    m.insert("in_order_fraction".into(), json!(in_order as f64 / rounds));
    m.insert(
        "in_order".into(),
        json!(if in_order == orders.len() { 1.0 } else { 0.0 }),
    );
    m.insert(
        "one_wait_per_manager_fraction".into(),
        json!(predicted as f64 / rounds),
    );
    m.insert("inversions_spread".into(), json!(spread(&inv)));
    m.insert(
        "inversions_mean".into(),
        json!(inv.iter().sum::<f64>() / rounds),
    );
    m.insert(
        "inversions_possible".into(),
        json!(n * n.saturating_sub(1) / 2),
    );
    m.insert("max_displacement_spread".into(), json!(spread(&disp)));
    m.insert(
        "inversions_beyond_turns_spread".into(),
        json!(spread(&beyond)),
    );
    m.insert("per_round".into(), per_round);
    m.insert(
        "out_of_order".into(),
        json!(orders
            .iter()
            .enumerate()
            .filter(|(_, o)| !o.in_order())
            .map(|(r, o)| json!({"round": r, "served": o.served, "managers": o.managers}))
            .collect::<Vec<_>>()),
    );
    m
}

/// One line: rounds in exact order, inversions and displacement per round.
pub fn print(name: &str, r: &ScenarioReport) {
    let get = |k: &str| r.extra.get(k).cloned().unwrap_or(Value::Null);
    let tri = |k: &str| {
        let v = get(k);
        let a = |i: usize| v.get(i).and_then(Value::as_f64).unwrap_or(f64::NAN);
        format!("{:.0} / {:.0} / {:.0}", a(0), a(1), a(2))
    };
    println!(
        "{name}: {} waiters on {} manager(s) + the head's, {} permits; in arrival order {:.2} of {} rounds; \
         inversions per round min / median / max {} (of {} possible); max displacement {}; \
         as one wait per manager predicts {:.2} (inversions beyond that {}); \
         gap between grants p50 {:.0} / p99 {:.0} us",
        get("waiters"),
        get("managers"),
        get("permits"),
        get("in_order_fraction").as_f64().unwrap_or(f64::NAN),
        get("trials"),
        tri("inversions_spread"),
        get("inversions_possible"),
        tri("max_displacement_spread"),
        get("one_wait_per_manager_fraction")
            .as_f64()
            .unwrap_or(f64::NAN),
        tri("inversions_beyond_turns_spread"),
        r.p50_us,
        r.p99_us,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(served: &[usize]) -> Order {
        Order::of(served.to_vec(), vec![None; served.len()])
    }

    #[test]
    fn in_order_has_no_inversion_and_no_displacement() {
        let o = order(&[0, 1, 2, 3]);
        assert!(o.in_order());
        assert_eq!(o.inversions(), 0);
        assert_eq!(o.max_displacement(), 0);
    }

    #[test]
    fn one_swap_and_a_reversal() {
        let o = order(&[0, 2, 1, 3]);
        assert!(!o.in_order());
        assert_eq!(o.inversions(), 1);
        assert_eq!(o.max_displacement(), 1);
        let r = order(&[3, 2, 1, 0]);
        assert_eq!(r.inversions(), 6);
        assert_eq!(r.max_displacement(), 3);
        // One late waiter overtaken by three.
        let late = order(&[1, 2, 3, 0]);
        assert_eq!(late.inversions(), 3);
        assert_eq!(late.max_displacement(), 3);
    }

    #[test]
    fn one_wait_per_manager_takes_turns() {
        // Arrivals on managers A A B: A's second waiter queues behind B.
        let a = Some(0);
        let b = Some(1);
        assert_eq!(one_wait_per_manager(&[None, a, a, b]), vec![0, 1, 3, 2]);
        // One manager, or one waiter per manager: arrival order.
        assert_eq!(one_wait_per_manager(&[None, a, a, a]), vec![0, 1, 2, 3]);
        assert_eq!(
            one_wait_per_manager(&[None, a, b, Some(2)]),
            vec![0, 1, 2, 3]
        );
        // Alternating arrivals are served in arrival order too.
        assert_eq!(one_wait_per_manager(&[a, b, a, b]), vec![0, 1, 2, 3]);
        let o = Order::of(vec![0, 1, 3, 2], vec![None, a, a, b]);
        assert!(o.as_one_wait_per_manager() && !o.in_order());
        assert_eq!((o.inversions(), o.inversions_beyond_turns()), (1, 0));
        // Served in arrival order where the turns predict 0 1 3 2.
        let fifo = Order::of(vec![0, 1, 2, 3], vec![None, a, a, b]);
        assert_eq!((fifo.inversions(), fifo.inversions_beyond_turns()), (0, 1));
    }

    #[test]
    fn summary_over_rounds() {
        let s = summary(&[order(&[0, 1, 2]), order(&[1, 0, 2]), order(&[2, 1, 0])]);
        assert_eq!(s["trials"], json!(3));
        // Every waiter on the head's manager: only the in-order round matches.
        assert!((s["one_wait_per_manager_fraction"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s["in_order"], json!(0.0));
        assert!((s["in_order_fraction"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s["inversions_spread"], json!([0.0, 1.0, 3.0]));
        assert_eq!(s["inversions_possible"], json!(3));
        assert_eq!(s["max_displacement_spread"], json!([0.0, 1.0, 2.0]));
        // One manager: the turns explain nothing, every inversion is beyond them.
        assert_eq!(s["inversions_beyond_turns_spread"], json!([0.0, 1.0, 3.0]));
        assert_eq!(s["out_of_order"].as_array().unwrap().len(), 2);
        assert_eq!(s["per_round"]["inversions"], json!([0.0, 1.0, 3.0]));
    }
}
