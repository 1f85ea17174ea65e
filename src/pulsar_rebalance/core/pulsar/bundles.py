"""Topic -> bundle mapping and bundle-range arithmetic, exactly as Pulsar's ``NamespaceBundleFactory``.

Pulsar splits each namespace's 32-bit hash space ``[0x00000000, 0xffffffff]`` into bundles at sorted
*boundaries* ``p0 < p1 < ... < pn``: bundle ``i`` is ``[p_i, p_i+1)`` and the last one is closed,
``[p_n-1, p_n]``. A topic belongs to the bundle containing ``crc32(full topic name)``.

Sources (apache/pulsar, ``pulsar-broker/src/main/java/org/apache/pulsar/common/naming/``):
``NamespaceBundleFactory`` (``getLongHashCode``, ``getBundle(ns, "lo_hi")``, ``splitBundles``,
``canSplitBundle``), ``NamespaceBundles`` (constructor, ``getBundle(hash)``), and
``NamespacesBase.getBundles(int)`` (boundaries of a new namespace).

Deviations from Pulsar, on purpose (each documented where it happens):

* **Hash exactly 0xffffffff.** ``NamespaceBundles.getBundle`` binary-searches the boundaries; a
  hash equal to the last boundary yields index ``n`` and Pulsar throws ``IndexOutOfBoundsException``
  (a topic whose crc32 is 0xffffffff cannot be looked up at all), although the last bundle is
  closed and ``NamespaceBundle.includes()`` says the hash belongs to it. We **deviate**:
  :meth:`NamespaceBundles.find` returns the last (closed) bundle.
* **Degenerate splits.** Pulsar's factory would create empty bundles ``[x, x)`` from duplicate
  split boundaries or from an equal split with more children than hash values; we raise instead.
* **Bundle-range strings** with more than one ``_`` are rejected (Pulsar silently ignores the
  extra parts).
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pulsar_rebalance.errors import ScenarioError

FULL_LOWER_BOUND = 0x00000000
"""``NamespaceBundles.FULL_LOWER_BOUND`` (``Policies.FIRST_BOUNDARY = "0x00000000"``)."""
FULL_UPPER_BOUND = 0xFFFFFFFF
"""``NamespaceBundles.FULL_UPPER_BOUND`` (``Policies.LAST_BOUNDARY = "0xffffffff"``)."""
FULL_RANGE_NAME = "0x00000000_0xffffffff"

MAX_NUM_BUNDLES = 1 << 32
"""Pulsar's limit for a namespace's bundle count: ``(0, 2^32]``."""

_DECIMAL = re.compile(r"[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_OCTAL = re.compile(r"[0-7]+")


def topic_hash(topic: str) -> int:
    """Pulsar's ``getLongHashCode(topic)``: Guava crc32 of the UTF-8 name, as an unsigned 32-bit int.

    Guava's ``Hashing.crc32()`` is ``java.util.zip.CRC32`` (= :func:`zlib.crc32`) and ``padToLong()``
    of a 32-bit hash is its unsigned value. Hash the **full** name (``persistent://t/ns/topic``;
    each partition ``...-partition-N`` separately), which is what ``TopicName.toString()`` gives.
    """
    return zlib.crc32(topic.encode("utf-8"))


def format_boundary(value: int) -> str:
    """``String.format("0x%08x", value)``: lower-case hex, at least 8 digits."""
    if not 0 <= value <= FULL_UPPER_BOUND:
        raise ValueError(f"boundary {value!r} is outside [0x00000000, 0xffffffff]")
    return f"0x{value:08x}"


def parse_boundary(value: str | int, path: str) -> int:
    """Parse a boundary like Java ``Long.decode`` and check it is in ``[0, 0xffffffff]``.

    ``Long.decode`` semantics: optional sign, then ``0x``/``0X``/``#`` = hexadecimal, a leading
    ``0`` followed by digits = **octal** (``"010"`` is 8), otherwise decimal; no whitespace, no
    underscores, no sign after the radix prefix. A JSON integer is taken as is (booleans are not
    numbers). Errors are :class:`ScenarioError` naming ``path``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ScenarioError(path, f"expected a hex string like '0x40000000' or an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        number = _long_decode(value, path)
    if not FULL_LOWER_BOUND <= number <= FULL_UPPER_BOUND:
        raise ScenarioError(path, f"{value!r} is outside the hash range [0x00000000, 0xffffffff]")
    return number


_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1


def parse_long(value: str | int, path: str) -> int:
    """Parse a Java ``long`` (``Long.decode`` syntax for strings), any value in the signed 64-bit range.

    Used for split *positions*, which Pulsar accepts as arbitrary longs and then filters to those
    strictly inside the bundle.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ScenarioError(path, f"expected a hex string like '0x40000000' or an integer, got {value!r}")
    number = value if isinstance(value, int) else _long_decode(value, path)
    if not _LONG_MIN <= number <= _LONG_MAX:
        raise ScenarioError(path, f"{value!r} does not fit in a Java long")
    return number


def _long_decode(text: str, path: str) -> int:
    s = text
    negative = False
    if s[:1] in ("+", "-"):
        negative = s[0] == "-"
        s = s[1:]
    if s[:2] in ("0x", "0X"):
        digits, radix, pattern = s[2:], 16, _HEX
    elif s[:1] == "#":
        digits, radix, pattern = s[1:], 16, _HEX
    elif s[:1] == "0" and len(s) > 1:
        digits, radix, pattern = s[1:], 8, _OCTAL
    else:
        digits, radix, pattern = s, 10, _DECIMAL
    if not digits or pattern.fullmatch(digits) is None:
        raise ScenarioError(path, f"cannot parse {text!r} as a number (Java Long.decode syntax, e.g. '0x40000000')")
    number = int(digits, radix)
    return -number if negative else number


@dataclass(frozen=True, slots=True)
class BundleRange:
    """A bundle's hash range: ``[lower, upper)``, or ``[lower, upper]`` when ``closed_upper``.

    Pulsar closes the upper bound of the last bundle of a namespace; when parsing a range string it
    closes it iff ``upper == 0xffffffff`` (:meth:`of` applies that rule).
    """

    lower: int
    upper: int
    closed_upper: bool

    def __post_init__(self) -> None:
        if not (FULL_LOWER_BOUND <= self.lower < self.upper <= FULL_UPPER_BOUND):
            raise ValueError(
                f"invalid bundle range lower=0x{self.lower:x} upper=0x{self.upper:x}: "
                "need 0x00000000 <= lower < upper <= 0xffffffff"
            )

    @classmethod
    def of(cls, lower: int, upper: int) -> BundleRange:
        """A range whose upper bound is closed iff it is ``0xffffffff`` (Pulsar's parsing rule)."""
        return cls(lower, upper, upper == FULL_UPPER_BOUND)

    @classmethod
    def full(cls) -> BundleRange:
        """``[0x00000000, 0xffffffff]``: a namespace with a single bundle."""
        return cls(FULL_LOWER_BOUND, FULL_UPPER_BOUND, True)

    @classmethod
    def parse(cls, name: str, path: str) -> BundleRange:
        """Parse ``"0x00000000_0x40000000"`` like ``NamespaceBundleFactory.getBundle(ns, range)``.

        Both parts use ``Long.decode`` (so ``0X``/upper-case hex work); the upper bound is closed iff
        it equals ``0xffffffff``. Errors are :class:`ScenarioError` naming ``path``.
        """
        if not isinstance(name, str):
            raise ScenarioError(path, f"expected a bundle range string like '0x00000000_0x40000000', got {name!r}")
        parts = name.split("_")
        if len(parts) != 2:
            raise ScenarioError(
                path, f"invalid bundle range {name!r}: expected '<lower>_<upper>', e.g. '0x00000000_0x40000000'"
            )
        lower = parse_boundary(parts[0], path)
        upper = parse_boundary(parts[1], path)
        if lower >= upper:
            raise ScenarioError(path, f"invalid bundle range {name!r}: lower bound must be below upper bound")
        return cls.of(lower, upper)

    @property
    def name(self) -> str:
        """Pulsar's bundle range string ``String.format("0x%08x_0x%08x", lower, upper)``."""
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    def contains(self, hash_value: int) -> bool:
        """Guava ``Range.contains``: ``lower <= h < upper`` (``<= upper`` when closed)."""
        if self.closed_upper:
            return self.lower <= hash_value <= self.upper
        return self.lower <= hash_value < self.upper

    def can_split(self) -> bool:
        """``NamespaceBundleFactory.canSplitBundle``: ``upper - lower > 1``."""
        return self.upper - self.lower > 1

    def __str__(self) -> str:
        return self.name


def default_boundaries(num_bundles: int) -> list[int]:
    """Boundaries of a namespace created with ``num_bundles`` bundles (``NamespacesBase.getBundles``).

    ``segSize = 2^32 / n`` (integer division); boundaries ``0, seg, 2*seg, ..., (n-1)*seg`` and
    the last one is ``2^32 - 1 = 0xffffffff`` (so the last bundle absorbs the remainder).
    4 bundles -> ``[0x00000000, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff]``.
    """
    if isinstance(num_bundles, bool) or not isinstance(num_bundles, int):
        raise ValueError(f"number of bundles must be an integer, got {num_bundles!r}")
    if not 0 < num_bundles <= MAX_NUM_BUNDLES:
        raise ValueError(f"number of bundles must be in (0, 2^32], got {num_bundles}")
    max_val = 1 << 32
    seg = max_val // num_bundles
    return [0, *(seg * i for i in range(1, num_bundles)), max_val - 1]


class NamespaceBundles:
    """A namespace's bundles, from its sorted boundaries (``NamespaceBundles``).

    Validates: at least 2 boundaries, each an int in ``[0, 0xffffffff]``, strictly increasing.
    Errors are :class:`ScenarioError` naming ``path[i]``. The last bundle is closed (as in Pulsar,
    whatever its upper value); the boundaries need not span the full hash range (Pulsar only
    enforces that when a namespace is created with custom boundaries).
    """

    __slots__ = ("_boundaries", "_ranges")

    def __init__(self, boundaries: Sequence[int], *, path: str = "boundaries") -> None:
        values = list(boundaries)
        if len(values) < 2:
            raise ScenarioError(path, f"need at least 2 boundaries, got {len(values)}")
        for i, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScenarioError(f"{path}[{i}]", f"expected an integer boundary, got {value!r}")
            if not FULL_LOWER_BOUND <= value <= FULL_UPPER_BOUND:
                raise ScenarioError(f"{path}[{i}]", f"0x{value:x} is outside [0x00000000, 0xffffffff]")
            if i and value <= values[i - 1]:
                raise ScenarioError(
                    f"{path}[{i}]",
                    f"boundaries must be strictly increasing: {format_boundary(value)} does not follow "
                    f"{format_boundary(values[i - 1])}",
                )
        self._boundaries: tuple[int, ...] = tuple(values)
        last = len(values) - 2
        self._ranges: tuple[BundleRange, ...] = tuple(
            BundleRange(values[i], values[i + 1], i == last) for i in range(len(values) - 1)
        )

    @classmethod
    def parse(cls, raw: object, path: str = "boundaries") -> NamespaceBundles:
        """From a JSON array of boundaries (hex strings per ``Long.decode``, or integers)."""
        if not isinstance(raw, (list, tuple)):
            raise ScenarioError(path, f"expected an array of boundaries, got {type(raw).__name__}")
        return cls([parse_boundary(v, f"{path}[{i}]") for i, v in enumerate(raw)], path=path)

    @classmethod
    def with_num_bundles(cls, num_bundles: int) -> NamespaceBundles:
        """The bundles of a namespace created with ``num_bundles`` (see :func:`default_boundaries`)."""
        return cls(default_boundaries(num_bundles))

    @property
    def boundaries(self) -> tuple[int, ...]:
        return self._boundaries

    @property
    def ranges(self) -> tuple[BundleRange, ...]:
        return self._ranges

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamespaceBundles) and other._boundaries == self._boundaries

    def __hash__(self) -> int:
        return hash(self._boundaries)

    def __repr__(self) -> str:
        return f"NamespaceBundles([{', '.join(format_boundary(b) for b in self._boundaries)}])"

    def find(self, topic_or_hash: str | int) -> BundleRange:
        """The bundle containing a topic (hashed with :func:`topic_hash`) or a raw hash.

        Pulsar: ``idx = binarySearch(partitions, h)``; ``lowerIdx = idx < 0 ? -(idx + 2) : idx`` -
        i.e. the largest boundary <= h (``bisect_right - 1``). A hash below the first boundary
        raises ``ValueError`` (Pulsar: ``IndexOutOfBoundsException``); so does one above the last
        boundary. **Deviation:** a hash equal to the last boundary maps to the last (closed)
        bundle, where Pulsar throws ``IndexOutOfBoundsException``.
        """
        h = topic_hash(topic_or_hash) if isinstance(topic_or_hash, str) else topic_or_hash
        bounds = self._boundaries
        idx = bisect_right(bounds, h) - 1
        if idx < 0:
            raise ValueError(f"hash 0x{h:08x} is below the first boundary {format_boundary(bounds[0])}")
        if idx >= len(self._ranges):
            if h == bounds[-1]:
                return self._ranges[-1]  # deviation, see docstring
            raise ValueError(f"hash 0x{h:08x} is above the last boundary {format_boundary(bounds[-1])}")
        return self._ranges[idx]

    def with_split(self, target: BundleRange, children: Sequence[BundleRange]) -> NamespaceBundles:
        """The namespace's bundles after replacing ``target`` by ``children`` (from :func:`split_range`)."""
        try:
            i = self._ranges.index(target)
        except ValueError:
            raise ValueError(f"bundle {target.name} is not a bundle of {self!r}") from None
        if not children or children[0].lower != target.lower or children[-1].upper != target.upper:
            raise ValueError(f"children do not cover bundle {target.name}")
        inner = [c.lower for c in children[1:]]
        return NamespaceBundles([*self._boundaries[: i + 1], *inner, *self._boundaries[i + 1 :]])

    def to_bundles_data(self) -> dict[str, object]:
        """Pulsar's ``BundlesData`` JSON: ``{"boundaries": ["0x00000000", ...], "numBundles": N}``."""
        return {"boundaries": [format_boundary(b) for b in self._boundaries], "numBundles": len(self._ranges)}


def split_range(
    bundle: BundleRange,
    *,
    num_bundles: int = 2,
    boundaries: Sequence[int] | None = None,
) -> list[BundleRange]:
    """The children of splitting ``bundle`` (``NamespaceBundleFactory.splitBundles``).

    * With ``boundaries`` (non-empty): Pulsar sorts them and requires
      ``lower < first`` and ``last < upper`` (else ``IllegalArgumentException`` -> REST 412);
      children are ``[lower, b1), [b1, b2), ..., [bk, upper)`` - ``len(boundaries) + 1`` of them.
      ``testSplitBundleByFixBoundary``: boundary ``lower + 10`` -> ``[lower, lower+10)``, ``[lower+10, upper)``.
    * Without: ``num_bundles`` equal children, ``seg = (upper - lower) / num_bundles`` (integer
      division), boundaries ``lower + seg, lower + 2*seg, ...``; the remainder goes to the last child.
      The full range split in two gives ``0x00000000_0x7fffffff`` and ``0x7fffffff_0xffffffff``.

    The last child keeps the parent's closed/open upper bound. Raises ``ValueError`` when the bundle
    cannot be split (``upper - lower <= 1``, Pulsar's ``canSplitBundle``), for out-of-range
    boundaries (as Pulsar), and - deviation - for duplicate boundaries or more equal children than
    hash values, where Pulsar would create empty bundles.
    """
    if not bundle.can_split():
        raise ValueError(f"bundle {bundle.name} can't be split further (upper - lower <= 1)")
    if boundaries:
        points = sorted(boundaries)
        for b in points:
            if isinstance(b, bool) or not isinstance(b, int):
                raise ValueError(f"split boundary {b!r} is not an integer")
        if not (points[0] > bundle.lower and points[-1] < bundle.upper):
            raise ValueError(
                f"split boundaries must lie strictly inside bundle {bundle.name} "
                f"(got {', '.join(format_boundary(p) if 0 <= p <= FULL_UPPER_BOUND else repr(p) for p in points)})"
            )
        for a, b in zip(points, points[1:]):
            if a == b:
                raise ValueError(f"duplicate split boundary {format_boundary(a)} (Pulsar would create an empty bundle)")
    else:
        if isinstance(num_bundles, bool) or not isinstance(num_bundles, int) or num_bundles < 2:
            raise ValueError(f"num_bundles must be an integer >= 2, got {num_bundles!r}")
        seg = (bundle.upper - bundle.lower) // num_bundles
        if seg == 0:
            raise ValueError(
                f"cannot split bundle {bundle.name} into {num_bundles} non-empty parts "
                "(Pulsar would create empty bundles)"
            )
        points = [bundle.lower + seg * j for j in range(1, num_bundles)]
    edges = [bundle.lower, *points, bundle.upper]
    last = len(edges) - 2
    return [
        BundleRange(edges[i], edges[i + 1], bundle.closed_upper if i == last else False) for i in range(len(edges) - 1)
    ]


def bundle_full_name(namespace: str, range_name: str) -> str:
    """``tenant/namespace/0x.._0x..``: how load reports and the admin API name a bundle."""
    return f"{namespace}/{range_name}"


def split_full_name(full: str) -> tuple[str, str]:
    """``(namespace, range)`` of a full bundle name: split at the **last** ``/`` like
    ``LoadManagerShared.getNamespaceNameFromBundleName`` / ``getBundleRangeFromBundleName``."""
    namespace, sep, range_name = full.rpartition("/")
    if not sep or not namespace or not range_name:
        raise ValueError(f"{full!r} is not a full bundle name like 'tenant/ns/0x00000000_0x40000000'")
    return namespace, range_name


TOPIC_DOMAINS = ("persistent", "non-persistent")


def topic_namespace(topic: str) -> str:
    """The namespace of a full topic name (``persistent://tenant/ns/local`` -> ``tenant/ns``).

    Follows ``TopicName``: after ``domain://`` the rest splits into at most 4 parts on ``/``; 3 parts
    is a v2 name (tenant/namespace/local), 4 parts a v1 name (tenant/cluster/namespace/local).
    Raises ``ValueError`` for anything that is not a full topic name - Pulsar hashes the full
    name, so a short name would silently map to a different bundle.
    """
    domain, sep, rest = topic.partition("://")
    if not sep or domain not in TOPIC_DOMAINS:
        raise ValueError(
            f"{topic!r} is not a full topic name: expected 'persistent://tenant/namespace/topic' "
            "or 'non-persistent://...' (Pulsar hashes the full name)"
        )
    parts = rest.split("/", 3)
    if len(parts) < 3 or not all(parts):
        raise ValueError(f"{topic!r} is not a full topic name: expected '{domain}://tenant/namespace/topic'")
    return "/".join(parts[:2]) if len(parts) == 3 else "/".join(parts[:3])


def assign_topics(bundles: NamespaceBundles, topics: Iterable[str]) -> dict[str, BundleRange]:
    """``{topic: bundle}`` for each topic (see :meth:`NamespaceBundles.find` for the 0xffffffff rule)."""
    return {topic: bundles.find(topic) for topic in topics}
