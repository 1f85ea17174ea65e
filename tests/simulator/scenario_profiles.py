"""What the held-out scenario sets' tests read off a built model: the factor a scenario's time profile puts on
each namespace's rates now, and advancing the model to a given minute."""

from __future__ import annotations

from pulsar_rebalance.simulator.dynamics import ClusterModel


def factors(model: ClusterModel, field: str = "rate_in") -> dict[str, float]:
    """Per namespace, the factor the scenario's profile puts on its topics' ``field`` now (the shaped rates over the
    base model's: daily cycle, drift and bursts alone)."""
    shaped = {t.name: getattr(t, field) for t in model.topics}
    ClusterModel._update_rates(model)  # the rates without the profile
    plain = {t.name: getattr(t, field) for t in model.topics}
    model._update_rates()
    out: dict[str, set[float]] = {}
    for t in model.topics:
        if plain[t.name] > 0:
            out.setdefault(t.namespace, set()).add(round(shaped[t.name] / plain[t.name], 9))
    assert all(len(v) == 1 for v in out.values()), "a profile is one factor per namespace"
    return {ns: v.pop() for ns, v in out.items()}


def at(model: ClusterModel, minute: int) -> None:
    """Advance ``model`` to simulated ``minute`` (from where it is)."""
    if minute > model.cycle:
        model.advance(minute - model.cycle)
