"""The Layout value type: its algebra, its text form and what it does to shapes (hypothesis properties)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.core.layout import layout as L
from inspector.core.layout.layout import Layout


def layouts(min_rank=1, max_rank=6):
    return st.integers(min_rank, max_rank).flatmap(lambda r: st.permutations(range(r)).map(Layout))


def pair_of_rank():
    return st.integers(1, 6).flatmap(lambda r: st.tuples(st.permutations(range(r)).map(Layout),
                                                         st.permutations(range(r)).map(Layout)))


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_inverse_undoes_and_identity_is_neutral(a):
    ident = Layout.as_tflite(a.rank)
    assert a.then(a.inverse()) == ident and a.inverse().then(a) == ident
    assert a.then(ident) == a == ident.then(a)
    assert a.inverse().inverse() == a


@settings(max_examples=200, deadline=None)
@given(pair_of_rank(), st.data())
def test_then_is_transposing_twice(ab, data):
    a, b = ab
    shape = data.draw(st.lists(st.integers(1, 4), min_size=a.rank, max_size=a.rank))
    x = np.arange(int(np.prod(shape))).reshape(shape)
    assert np.array_equal(np.transpose(np.transpose(x, a.perm), b.perm), np.transpose(x, a.then(b).perm))
    assert a.then(b).apply(shape) == b.apply(a.apply(shape)) == np.transpose(x, a.then(b).perm).shape


@settings(max_examples=200, deadline=None)
@given(layouts(), st.data())
def test_only_moves_size1_means_the_same_memory_order(a, data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=a.rank, max_size=a.rank))
    x = np.arange(int(np.prod(shape))).reshape(shape)
    same_order = np.array_equal(np.transpose(x, a.perm).ravel(), x.ravel())
    if a.only_moves_size1(shape):
        assert same_order


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_text_round_trips(a):
    assert Layout.parse(a.name, a.rank) == a
    assert Layout.parse(",".join(map(str, a.perm)), a.rank) == a


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_names_say_what_they_mean(rank):
    cf, keep = Layout.channels_first(rank), Layout.as_tflite(rank)
    assert cf.name == {3: "NCW", 4: "NCHW", 5: "NCDHW"}[rank] and keep.name == {3: "NWC", 4: "NHWC", 5: "NDHWC"}[rank]
    assert Layout.parse("channels-first", rank) == cf == Layout.parse(cf.name.lower(), rank)
    assert Layout.parse("keep", rank) == keep == Layout.parse(keep.name, rank)
    assert "".join(cf.apply({3: "NWC", 4: "NHWC", 5: "NDHWC"}[rank])) == cf.name
    assert L.name(cf.perm) == cf.name and L.parse(cf.name, rank) == cf.perm


@settings(max_examples=300, deadline=None)
@given(layouts(0, 7))
def test_the_name_function_is_the_layouts_name_and_keeps_no_table(a):
    """L.name (the planner's and emitter's) spells what Layout.name does, is_identity agrees with the type, and no
    table of names outlives a conversion: a process-wide one made every conversion after the first cheaper."""
    assert L.name(a.perm) == L.name(list(a.perm)) == a.name
    assert L.is_identity(a.perm) == L.is_identity(list(a.perm)) == a.is_as_tflite == (a.perm == L.identity(a.rank))
    assert not hasattr(L.name, "cache_info") and not any(hasattr(f, "cache_info") for f in vars(L).values())


def test_the_name_function_refuses_what_layout_refuses():
    for bad in [(0, 0), (1, 2), (0, 2, 3)]:
        with pytest.raises(ValueError, match="is not a permutation"):
            L.name(bad)
    assert L.name(None) == "as TFLite"


@pytest.mark.parametrize("text,rank", [("NCHW", 3), ("0,1,1", 3), ("channels-first", 2), ("sideways", 4),
                                       ("0,x,1", 3), ("0,1,2", 4)])
def test_refusals_are_one_line(text, rank):
    with pytest.raises(ValueError) as e:
        Layout.parse(text, rank)
    assert "\n" not in str(e.value) and text in str(e.value)


def test_only_permutations_are_layouts():
    for bad in [(0, 0), (1, 2), (0, 2, 3)]:
        with pytest.raises(ValueError):
            Layout(bad)
    assert Layout([0, 3, 1, 2]).perm == (0, 3, 1, 2) and hash(Layout((0, 3, 1, 2))) == hash(Layout([0, 3, 1, 2]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=5), st.data())
def test_a_reshape_carries_a_layout_only_when_that_commutes(src, data):
    """Whenever carried_by_reshape answers r, reshaping the transposed tensor gives the transposed reshape."""
    perm = data.draw(st.permutations(range(len(src))))
    x = np.arange(int(np.prod(src))).reshape(src)
    # A target made of merged neighbours, split factors and inserted 1s, as RESHAPEs in real models are.
    dst, i = [], 0
    while i < len(src):
        k = data.draw(st.integers(1, min(2, len(src) - i)))
        dst.append(int(np.prod(src[i:i + k])))
        i += k
        if data.draw(st.booleans()):
            dst.append(1)
    r = L.carried_by_reshape(src, dst, perm)
    if r is None:
        return
    got = np.transpose(x, perm).reshape(Layout(r).apply(dst))
    assert np.array_equal(got, np.transpose(x.reshape(dst), r))


def test_a_reshape_carries_channels_first_through_flattened_space():
    assert L.carried_by_reshape([1, 6, 10, 4], [1, 60, 4], L.channels_first(4)) == (0, 2, 1)
    assert L.carried_by_reshape([1, 60, 4], [1, 6, 10, 4], (0, 2, 1)) == L.channels_first(4)
    assert L.carried_by_reshape([1, 6, 10, 4], [1, 6, 40], L.channels_first(4)) is None      # W and C merge
