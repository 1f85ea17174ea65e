"""A synthetic snapshot at any scale: exactly what ``collect_load`` writes, without a cluster to read.

``generate_snapshot`` writes the run's ``topics.parquet`` and ``bundle_stats.parquet`` (same schemas and
layout as ``collect_load``) and the same Postgres rows (``runs``, ``brokers``, ``broker_load`` raw
reports, ``bundle_ranges``, ``ownership``) through ``collect.record_snapshot``, so every later stage
runs on it unchanged. Topic rows are generated inside Spark (``transforms.synthetic_topics``); the
driver holds broker- and bundle-level data only (load reports, boundaries, ownership).

The cluster: ``brokers`` brokers ``broker-NNNN.synthetic:8080``; ``namespaces`` namespaces
``tenant-<k % tenants>/ns-<k>`` sharing ``bundles`` bundles (Pulsar's equal creation boundaries);
bundle ``g`` (namespace-major order) owned by broker ``g % brokers``; ``topics`` topics spread
round-robin over the namespaces, each reported under the bundle its crc32 falls into, with
Zipf-distributed ``msgRateIn`` (exponent ``zipf_exponent``) summing to ``msg_rate_in_per_broker *
brokers``. Load reports are the simulator's (``simulator.cluster.load_report_json``: the same
resource model as the bundled simulated cluster).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.pulsar.bundles import default_boundaries
from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pipeline import context as C
from pulsar_rebalance.pipeline.collect import Snapshot, record_snapshot
from pulsar_rebalance.pipeline.params import RunParams, resource_weights

ROWS_PER_PARTITION = 500_000


@dataclass(frozen=True)
class SyntheticSpec:
    brokers: int = 1000
    namespaces: int = 200
    bundles: int = 100_000
    topics: int = 10_000_000
    tenants: int = 10
    zipf_exponent: float = 0.8
    msg_rate_in_per_broker: float = 10_000.0
    cluster: str = "synthetic"

    def __post_init__(self) -> None:
        for name in ("brokers", "namespaces", "bundles", "topics", "tenants"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"synthetic {name} must be a positive integer, got {getattr(self, name)!r}", key=name)
        if self.bundles < self.namespaces:
            raise ConfigError(
                f"synthetic bundles ({self.bundles}) must be >= namespaces ({self.namespaces}): "
                "every namespace has at least one bundle",
                key="bundles",
            )
        if not (self.zipf_exponent >= 0 and math.isfinite(self.zipf_exponent)):
            raise ConfigError(
                f"zipf_exponent must be a finite number >= 0, got {self.zipf_exponent!r}", key="zipf_exponent"
            )
        if not (self.msg_rate_in_per_broker > 0 and math.isfinite(self.msg_rate_in_per_broker)):
            raise ConfigError("msg_rate_in_per_broker must be a positive number", key="msg_rate_in_per_broker")

    @classmethod
    def cli_options(cls) -> list[tuple[str, type, object]]:
        """``(--flag, type, default)`` for every field (the job's command line)."""
        d = cls()
        return [(f"--{name.replace('_', '-')}", type(value), value) for name, value in asdict(d).items()]

    @classmethod
    def from_args(cls, args) -> SyntheticSpec:
        return cls(**{name: getattr(args, name) for name in asdict(cls())})

    def namespace_names(self) -> list[str]:
        return [f"tenant-{k % self.tenants}/ns-{k}" for k in range(self.namespaces)]

    def broker_ids(self) -> list[str]:
        return [f"broker-{i:04d}.synthetic:8080" for i in range(self.brokers)]

    def boundaries(self) -> dict[str, list[int]]:
        per, extra = divmod(self.bundles, self.namespaces)
        return {ns: default_boundaries(per + (1 if k < extra else 0)) for k, ns in enumerate(self.namespace_names())}

    def owners(self, boundaries: Mapping[str, list[int]]) -> dict[str, str]:
        brokers = self.broker_ids()
        out: dict[str, str] = {}
        for ns, bs in boundaries.items():
            for lo, hi in zip(bs, bs[1:]):
                out[f"{ns}/0x{lo:08x}_0x{hi:08x}"] = brokers[len(out) % len(brokers)]
        return out

    def top_msg_rate(self) -> float:
        """``msgRateIn`` of the rank-1 topic so that all topics sum to ``msg_rate_in_per_broker * brokers``."""
        total, chunk, s = 0.0, 1_000_000, self.zipf_exponent
        for start in range(1, self.topics + 1, chunk):
            total += math.fsum(r**-s for r in range(start, min(start + chunk, self.topics + 1)))
        return self.msg_rate_in_per_broker * self.brokers / total

    def rank_multiplier(self) -> int:
        """A multiplier coprime with ``topics``: ``i -> (i * m) % topics`` permutes the Zipf ranks."""
        m = max(1, int(self.topics * 0.6180339887)) | 1
        while math.gcd(m, self.topics) != 1:
            m += 2
        return m % self.topics or 1


def generate_snapshot(
    spark,
    ctx: C.JobContext,
    *,
    spec: SyntheticSpec,
    engine,
    params_doc: Mapping[str, Any] | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Write one synthetic collected snapshot for ``ctx.run_id`` (Parquet + Postgres), as ``collect_load`` would."""
    from pulsar_rebalance.pipeline import transforms as T
    from pulsar_rebalance.simulator.cluster import BrokerSpec, load_report_json
    from pulsar_rebalance.store.engine import session_scope

    params = RunParams.from_json(dict(params_doc or {}))  # bad params fail here, before any write
    now_ms = now_ms or int(time.time() * 1000)
    boundaries = spec.boundaries()
    owners = spec.owners(boundaries)
    started = time.perf_counter()
    topics = T.synthetic_topics(
        spark,
        topics=spec.topics,
        namespaces=spec.namespace_names(),
        owners=owners,
        boundaries=boundaries,
        zipf_exponent=spec.zipf_exponent,
        top_msg_rate=spec.top_msg_rate(),
        rank_multiplier=spec.rank_multiplier(),
        partitions=max(2, math.ceil(spec.topics / ROWS_PER_PARTITION)),
    )
    topics.write.mode("overwrite").parquet(ctx.path(C.TOPICS))
    T.bundle_stats_of_topics(spark.read.parquet(ctx.path(C.TOPICS))).write.mode("overwrite").parquet(
        ctx.path(C.BUNDLE_STATS)
    )
    last_stats: dict[str, dict[str, dict[str, Any]]] = {b: {} for b in spec.broker_ids()}
    for r in spark.read.parquet(ctx.path(C.BUNDLE_STATS)).toLocalIterator():  # bundle-level rows
        last_stats[r.broker][r.bundle] = {
            "msgRateIn": r.msg_rate_in,
            "msgThroughputIn": r.msg_throughput_in,
            "msgRateOut": r.msg_rate_out,
            "msgThroughputOut": r.msg_throughput_out,
            "consumerCount": r.consumer_count,
            "producerCount": r.producer_count,
            "topics": r.topics,
            "cacheSize": r.cache_size,
        }
    reports = {
        b: load_report_json(BrokerSpec(b), dict(sorted(st.items())), previous_bundles=set(), now_ms=now_ms)
        for b, st in last_stats.items()
    }
    snap = Snapshot(
        cluster=spec.cluster,
        admin_url=f"synthetic://{spec.cluster}",
        leader=spec.broker_ids()[0],
        brokers={b: f"http://{b}" for b in spec.broker_ids()},
        namespaces=boundaries,
        load_reports=reports,
        ownership=owners,
        collected_at_ms=now_ms,
        parsed={b: local_broker_data_from_json(r, f"load-report[{b}]") for b, r in reports.items()},
    )
    generated_s = time.perf_counter() - started
    weights = resource_weights(params.lb_config())
    with session_scope(engine) as s:
        record_snapshot(s, snap, run_id=ctx.run_id, params=params.to_json(), work_dir=ctx.work_dir, weights=weights)
    return {
        "spec": asdict(spec),
        "cluster": spec.cluster,
        "brokers": spec.brokers,
        "namespaces": spec.namespaces,
        "bundles": len(owners),
        "topics": spec.topics,
        "maxUsage": snap.max_weighted_usage(weights),
        "generateSeconds": round(generated_s, 2),
        "recordSeconds": round(time.perf_counter() - started - generated_s, 2),
    }
