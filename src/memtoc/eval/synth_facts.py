"""Planted facts: unique, checkable statements hidden in ordinary messages of the history.

Each fact comes from a template with a **query** a user would ask later: phrased differently from
the fact but sharing one to three key terms with it ("how often do we rotate the staging db
password?" for "The staging database password rotation is scheduled for every 45 days"). The
slots that make a fact unique (an environment, a package, a service, a made-up codename like
KESTREL-42) are drawn without replacement per template, so no two facts answer the same query.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memtoc.errors import ConfigError

_BIRDS = (
    "KESTREL",
    "HERON",
    "OSPREY",
    "MERLIN",
    "PLOVER",
    "SISKIN",
    "BITTERN",
    "CURLEW",
    "DUNLIN",
    "GANNET",
    "GOSHAWK",
    "HOBBY",
    "LAPWING",
    "NIGHTJAR",
    "ORIOLE",
    "PETREL",
    "REDSTART",
    "SHRIKE",
    "STARLING",
    "TERN",
    "WAGTAIL",
    "WHIMBREL",
    "WRYNECK",
    "AVOCET",
    "BUNTING",
    "CORMORANT",
)
_ENVS = ("staging", "production", "qa", "sandbox", "demo", "perf", "canary", "preview", "dr", "uat")
_PKGS = (
    ("numpy", "1.26.4", "ONNX exporter"),
    ("protobuf", "3.20.3", "gRPC stubs"),
    ("pydantic", "1.10.13", "settings loader"),
    ("sqlalchemy", "1.4.52", "audit plugin"),
    ("urllib3", "1.26.18", "legacy S3 client"),
    ("torch", "2.1.2", "CUDA 11.8 images"),
    ("pandas", "2.1.4", "parquet writer"),
    ("celery", "5.3.6", "redis transport"),
    ("cryptography", "41.0.7", "FIPS build"),
    ("grpcio", "1.59.3", "alpine wheels"),
    ("boto3", "1.28.85", "retry config"),
    ("redis", "4.6.0", "cluster client"),
)
_SERVICES = (
    "billing-gateway",
    "ledger-sync",
    "search-indexer",
    "notifier",
    "report-builder",
    "geo-lookup",
    "image-resizer",
    "audit-log",
    "invoice-renderer",
    "fraud-scorer",
    "catalog-api",
    "email-relay",
    "session-broker",
    "export-worker",
    "pricing-engine",
    "tax-calculator",
    "kyc-checker",
)
_VENDORS = ("Stripe", "Twilio", "SendGrid", "Mapbox", "Algolia", "Datadog", "PagerDuty", "Segment")
_PEOPLE = ("Priya", "Marco", "Yuki", "Fatima", "Lars", "Chen", "Amara", "Diego", "Ines", "Tomasz")
_CUSTOMERS = (
    "Acme Logistics",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Retail",
    "Wayne Foods",
    "Hooli",
    "Vandelay Imports",
    "Soylent Labs",
    "Tyrell Energy",
    "Cyberdyne Rail",
)
_CHANNELS = ("#ops-reports", "#data-quality", "#billing-alerts", "#infra-nightly", "#ml-runs")
_MONTHS = ("March", "April", "May", "June", "July", "September", "October", "November")


_CODES = tuple(f"{b}-{n}" for b in _BIRDS for n in (7, 12, 19, 23, 31, 42, 58, 64, 77, 86))
_VERSIONS = {name: (version, component) for name, version, component in _PKGS}
_POOLS: dict[str, tuple[str, ...]] = {
    "env": _ENVS,
    "pkg": tuple(_VERSIONS),
    "code": _CODES,
    "svc": _SERVICES,
    "customer": _CUSTOMERS,
    "vendor": _VENDORS,
}

_TEMPLATES: tuple[tuple[str, str, str], ...] = (
    (
        "env",
        "The {a} database password rotation is scheduled for every {days} days",
        "how often do we rotate the {a} db password?",
    ),
    (
        "pkg",
        "We pinned {a} to {version} because of the ABI break in the {component}",
        "why is {a} held back at an old version?",
    ),
    (
        "code",
        "Project {a} uses port {port} for its admin endpoint",
        "which port does {a} expose the admin endpoint on?",
    ),
    (
        "svc",
        "The {a} service sends its nightly report to the {channel} Slack channel",
        "where does {a} post the nightly report?",
    ),
    (
        "svc",
        "The max upload size for {a} is {mb} MB, enforced at the nginx layer",
        "what's the upload limit on {a}?",
    ),
    (
        "code",
        "The {a} batch job runs at {hhmm} UTC on weekdays",
        "what time does the {a} job kick off?",
    ),
    (
        "customer",
        "Customer {a} is on a custom rate limit of {rpm} requests per minute",
        "what throttling applies to {a}?",
    ),
    (
        "code",
        "The {a} webhook signing secret lives in Vault under secret/{a_lower}/webhook",
        "where do we keep the signing secret for {a}?",
    ),
    (
        "svc",
        "The retry budget for {a} calls is {retries} attempts with jittered backoff",
        "how many times does {a} retry a failed call?",
    ),
    (
        "code",
        "{person} owns the {a} migration and must approve schema changes to it",
        "who signs off on {a} schema work?",
    ),
    (
        "code",
        "The {a} training run uses a learning rate of {lr} with cosine decay",
        "what learning rate did {a} train with?",
    ),
    (
        "svc",
        "The legacy {a} v1 endpoint will be removed after {date}",
        "when is the old {a} API going away?",
    ),
    (
        "code",
        "The {a} cluster autoscaler is capped at {nodes} nodes to stay under budget",
        "what's the max node count for {a}?",
    ),
    (
        "vendor",
        "Our {a} API key for production expires on {date}",
        "when does the {a} key need renewing?",
    ),
    (
        "code",
        "The {a} feature flag must stay off for customers on the {plan} plan",
        "who should not get the {a} flag enabled?",
    ),
    (
        "svc",
        "We promised {customer} a {pct} percent monthly uptime SLA for {a}",
        "what uptime did we commit to for {a}?",
    ),
)
"""(anchor pool, fact, query): ``{a}`` is the unique anchor, the other slots are random details."""


@dataclass(frozen=True, slots=True)
class FactText:
    """A fact sentence and the question that needs it."""

    text: str
    query: str


def _slots(anchor: str, rng: random.Random) -> dict[str, str]:
    version, component = _VERSIONS.get(anchor, ("", ""))
    return {
        "a": anchor,
        "a_lower": anchor.lower(),
        "version": version,
        "component": component,
        "days": str(rng.choice((30, 45, 60, 90))),
        "port": str(rng.randrange(7000, 9999)),
        "channel": rng.choice(_CHANNELS),
        "mb": str(rng.choice((8, 16, 25, 50, 100))),
        "hhmm": f"{rng.randrange(0, 6):02d}:{rng.choice((5, 15, 40, 45)):02d}",
        "rpm": str(rng.choice((300, 600, 1200, 2500))),
        "retries": str(rng.randrange(3, 9)),
        "person": rng.choice(_PEOPLE),
        "lr": rng.choice(("3e-4", "1e-4", "5e-5", "2e-5")),
        "date": f"{rng.choice(_MONTHS)} {rng.randrange(2, 28)}",
        "nodes": str(rng.randrange(6, 60)),
        "plan": rng.choice(("free", "starter", "legacy")),
        "pct": rng.choice(("99.9", "99.95", "99.5")),
        "customer": rng.choice(_CUSTOMERS),
    }


def make_facts(count: int, rng: random.Random) -> list[FactText]:
    """``count`` unique facts, cycling through the templates; anchors drawn without replacement."""
    pools: list[tuple[list[str], str, str]] = []
    for pool_name, text, query in _TEMPLATES:
        pool = list(_POOLS[pool_name])
        rng.shuffle(pool)
        pools.append((pool, text, query))
    out: list[FactText] = []
    while len(out) < count:
        live = [p for p in pools if p[0]]
        if not live:
            raise ConfigError(
                f"at most {len(out)} unique planted facts are available", setting="planted_facts"
            )
        pool, text, query = live[len(out) % len(live)]
        slots = _slots(pool.pop(), rng)
        out.append(FactText(text.format_map(slots), query.format_map(slots)))
    return out


USER_FRAMES = (
    "Before I forget. {fact}. Anyway, back to the {topic} work.",
    "{fact}. Just so you know before you touch anything related.",
    "Side note for later. {fact}. Please keep it in mind.",
)
ASSISTANT_FRAMES = (
    "Noted. {fact}. I'll keep that in mind while working on the {topic} changes.",
    "One thing worth recording from the config I just read. {fact}.",
)
