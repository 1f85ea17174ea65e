"""Topic -> bundle mapping and bundle-range arithmetic (NamespaceBundleFactory / NamespaceBundles)."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.pulsar.bundles import (
    FULL_LOWER_BOUND,
    FULL_UPPER_BOUND,
    BundleRange,
    NamespaceBundles,
    bundle_full_name,
    default_boundaries,
    format_boundary,
    parse_boundary,
    parse_long,
    split_full_name,
    split_range,
    topic_hash,
    topic_namespace,
)
from pulsar_rebalance.errors import ScenarioError

from .test_split_algorithms import forge_topic

# The reference's table (zlib.crc32 == Guava Hashing.crc32().padToLong()).
KNOWN_HASHES = [
    ("persistent://pulsar/global/ns1/topic-1", 690289361, "0x00000000_0x40000000"),
    ("persistent://pulsar/use/ns2/topic-2", 2532456950, "0x80000000_0xc0000000"),
    ("persistent://public/default/my-topic", 732775927, "0x00000000_0x40000000"),
    ("persistent://public/default/test", 2855153909, "0x80000000_0xc0000000"),
    ("non-persistent://public/default/my-topic", 2199789898, "0x80000000_0xc0000000"),
]


@pytest.mark.parametrize(("topic", "crc", "bundle"), KNOWN_HASHES)
def test_known_crc32_table_and_default_bundle(topic: str, crc: int, bundle: str) -> None:
    assert topic_hash(topic) == crc
    assert NamespaceBundles.with_num_bundles(4).find(topic).name == bundle


def test_single_letter_hashes() -> None:
    assert [topic_hash(s) for s in ("a", "b", "c")] == [3904355907, 1908338681, 112844655]


def test_default_boundaries() -> None:
    assert [format_boundary(b) for b in default_boundaries(4)] == [
        "0x00000000",
        "0x40000000",
        "0x80000000",
        "0xc0000000",
        "0xffffffff",
    ]
    assert default_boundaries(1) == [0, 0xFFFFFFFF]
    # segSize = 2^32 / 3 = 0x55555555; the last bundle absorbs the remainder
    assert default_boundaries(3) == [0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF]
    for bad in (0, -1, (1 << 32) + 1):
        with pytest.raises(ValueError):
            default_boundaries(bad)


def test_constructor_ranges_last_closed() -> None:
    # NamespaceBundlesTest.testConstructor
    bundles = NamespaceBundles([0, 0x10000000, 0x40000000, 0xFFFFFFFF])
    assert bundles.ranges == (
        BundleRange(0, 0x10000000, False),
        BundleRange(0x10000000, 0x40000000, False),
        BundleRange(0x40000000, 0xFFFFFFFF, True),
    )
    assert bundles.to_bundles_data() == {
        "boundaries": ["0x00000000", "0x10000000", "0x40000000", "0xffffffff"],
        "numBundles": 3,
    }


def test_find_is_largest_boundary_not_above_the_hash() -> None:
    # NamespaceBundlesTest.testFindBundle partitions
    bundles = NamespaceBundles([0, 0x40000000, 0xA0000000, 0xB0000000, 0xC0000000, 0xFFFFFFFF])
    topic = "persistent://pulsar/global/ns1/topic-1"
    found = bundles.find(topic)
    assert found.contains(topic_hash(topic))
    assert bundles.find(0xA0000000).name == "0xa0000000_0xb0000000"  # a boundary starts its bundle
    assert bundles.find(0x9FFFFFFF).name == "0x40000000_0xa0000000"
    # boundaries that do not cover the hash: Pulsar throws IndexOutOfBoundsException
    narrow = NamespaceBundles([0xB0000000, 0xC0000000, 0xFFFFFFFF])
    with pytest.raises(ValueError, match="below the first boundary"):
        narrow.find(topic)
    with pytest.raises(ValueError, match="above the last boundary"):
        NamespaceBundles([0, 0x10]).find(0x11)


def test_hash_exactly_0xffffffff_maps_to_last_bundle_deviation() -> None:
    # Pulsar's getBundle throws IndexOutOfBoundsException here; we return the closed last bundle.
    topic = forge_topic("persistent://public/default/edge-", 0xFFFFFFFF)
    assert topic_hash(topic) == 0xFFFFFFFF
    bundles = NamespaceBundles.with_num_bundles(4)
    assert bundles.find(topic).name == "0xc0000000_0xffffffff"
    assert bundles.find(topic).contains(0xFFFFFFFF)


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        (["0x00000000"], "boundaries", "at least 2"),
        ([], "boundaries", "at least 2"),
        (["0x00000000", "0x80000000", "0x40000000", "0xffffffff"], "boundaries[2]", "strictly increasing"),
        (["0x00000000", "0x00000000", "0xffffffff"], "boundaries[1]", "strictly increasing"),
        (["0x00000000", "0x1ffffffff"], "boundaries[1]", "outside"),
        (["0x00000000", "zz"], "boundaries[1]", "cannot parse"),
        (["0x00000000", True], "boundaries[1]", "expected a hex string"),
        ("0x00000000,0xffffffff", "boundaries", "expected an array"),
    ],
)
def test_bad_boundaries_name_the_field(raw: object, field: str, fragment: str) -> None:
    with pytest.raises(ScenarioError) as info:
        NamespaceBundles.parse(raw)
    assert info.value.field == field
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0x40000000", 0x40000000),
        ("0X4000000A", 0x4000000A),
        ("#10", 16),
        ("1073741824", 1073741824),
        ("010", 8),  # Long.decode: leading 0 = octal
        ("0", 0),
        ("+0x10", 16),
        (4294967295, 0xFFFFFFFF),
    ],
)
def test_parse_boundary_long_decode(text: str | int, expected: int) -> None:
    assert parse_boundary(text, "b") == expected


@pytest.mark.parametrize("text", ["0x", "0x+10", " 0x10", "0x1_0", "08", "0xg", "", "-0x1", "0x100000000", "1e3"])
def test_parse_boundary_rejects(text: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_boundary(text, "positions[3]")
    assert info.value.field == "positions[3]"


def test_parse_long_accepts_any_java_long() -> None:
    assert parse_long(-1, "p") == -1
    assert parse_long("-0x10", "p") == -16
    with pytest.raises(ScenarioError):
        parse_long(1 << 63, "p")


def test_bundle_range_parse_and_closedness() -> None:
    r = BundleRange.parse("0x00000000_0x40000000", "bundle")
    assert (r.lower, r.upper, r.closed_upper) == (0, 0x40000000, False)
    assert not r.contains(0x40000000) and r.contains(0x3FFFFFFF) and r.contains(0)
    last = BundleRange.parse("0XC0000000_0XFFFFFFFF", "bundle")
    assert last.closed_upper and last.contains(0xFFFFFFFF)
    assert last.name == "0xc0000000_0xffffffff"
    assert BundleRange.full().name == "0x00000000_0xffffffff"
    for bad in ("0x00000000", "0x1_0x2_0x3", "0x40000000_0x40000000", "0x50000000_0x40000000", "a_b", 7):
        with pytest.raises(ScenarioError) as info:
            BundleRange.parse(bad, "bundle")  # type: ignore[arg-type]
        assert info.value.field == "bundle"


def test_can_split() -> None:
    assert not BundleRange.of(5, 6).can_split()
    assert BundleRange.of(5, 7).can_split()
    with pytest.raises(ValueError, match="can't be split further"):
        split_range(BundleRange.of(5, 6))


def test_split_full_range_in_two_three_levels() -> None:
    # NamespaceBundlesTest.testSplitBundleInTwo: the midpoint is 0x7fffffff, not 0x80000000
    full = BundleRange.full()
    level1 = split_range(full)
    assert [c.name for c in level1] == ["0x00000000_0x7fffffff", "0x7fffffff_0xffffffff"]
    assert [c.closed_upper for c in level1] == [False, True]
    level2 = [c.name for parent in level1 for c in split_range(parent)]
    assert level2 == [
        "0x00000000_0x3fffffff",
        "0x3fffffff_0x7fffffff",
        "0x7fffffff_0xbfffffff",
        "0xbfffffff_0xffffffff",
    ]
    level3 = [c.name for parent in (BundleRange.parse(n, "b") for n in level2) for c in split_range(parent)]
    assert [n.split("_")[1] for n in level3[::2]] == ["0x1fffffff", "0x5fffffff", "0x9fffffff", "0xdfffffff"]


def test_split_into_four_spans_parent() -> None:
    # NamespaceBundlesTest.testSplitBundles: segSize = 0xffffffff / 4 = 0x3fffffff, remainder to the last
    children = split_range(BundleRange.full(), num_bundles=4)
    assert [c.name for c in children] == [
        "0x00000000_0x3fffffff",
        "0x3fffffff_0x7ffffffe",
        "0x7ffffffe_0xbffffffd",
        "0xbffffffd_0xffffffff",
    ]
    assert children[0].lower == FULL_LOWER_BOUND and children[-1].upper == FULL_UPPER_BOUND


def test_split_by_fixed_boundary() -> None:
    # NamespaceBundlesTest.testSplitBundleByFixBoundary
    full = BundleRange.full()
    children = split_range(full, boundaries=[full.lower + 10])
    assert (children[0].lower, children[0].upper) == (0, 10)
    assert children[1].lower == full.lower + 10
    for bad in ([full.lower], [full.upper]):
        with pytest.raises(ValueError, match="strictly inside"):
            split_range(full, boundaries=bad)


def test_split_with_several_boundaries_sorts_and_rejects_duplicates() -> None:
    r = BundleRange.of(0, 0x80000000)
    children = split_range(r, boundaries=[0x60000000, 0x20000000])
    assert [c.name for c in children] == ["0x00000000_0x20000000", "0x20000000_0x60000000", "0x60000000_0x80000000"]
    with pytest.raises(ValueError, match="duplicate"):
        split_range(r, boundaries=[0x20000000, 0x20000000])
    with pytest.raises(ValueError, match="non-empty"):
        split_range(BundleRange.of(0, 3), num_bundles=4)


def test_seed_partition_example_split_at_0x4000() -> None:
    # seed: partitions [0x0000, 0x8000, 0xFFFF], split [0x0000, 0x8000) at 0x4000
    ns = NamespaceBundles([0x0000, 0x8000, 0xFFFF])
    target = ns.ranges[0]
    after = ns.with_split(target, split_range(target, boundaries=[0x4000]))
    assert after.boundaries == (0x0000, 0x4000, 0x8000, 0xFFFF)
    assert [r.name for r in after.ranges] == ["0x00000000_0x00004000", "0x00004000_0x00008000", "0x00008000_0x0000ffff"]


def test_full_names() -> None:
    assert bundle_full_name("public/default", "0x00000000_0xffffffff") == "public/default/0x00000000_0xffffffff"
    assert split_full_name("pulsar/use/ns1/0x00000000_0x40000000") == ("pulsar/use/ns1", "0x00000000_0x40000000")
    with pytest.raises(ValueError):
        split_full_name("0x00000000_0x40000000")


def test_topic_namespace() -> None:
    assert topic_namespace("persistent://public/default/t") == "public/default"
    assert topic_namespace("non-persistent://public/default/t-partition-3") == "public/default"
    assert topic_namespace("persistent://prop/cluster/ns/t") == "prop/cluster/ns"  # v1 name
    for bad in ("my-topic", "public/default/t", "persistent://public/t", "http://a/b/c", "persistent://a//c"):
        with pytest.raises(ValueError):
            topic_namespace(bad)
