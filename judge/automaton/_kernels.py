"""Compiled inner loops of the trie automaton (numba when installed, plain Python otherwise).

Every function here is a plain loop over numpy arrays. With numba installed
(a declared dependency) they are compiled once and cached on disk; without it
they run as ordinary Python, slower but identical, which is also how the tests
check the compiled and the interpreted versions agree (``NUMBA_DISABLE_JIT=1``).

Nothing here knows about tokenizers or labels; :mod:`judge.automaton.trie` does.
"""

from __future__ import annotations

import functools
import importlib.util
import threading

import numpy as np

#: numba is importable (a declared dependency). It is imported only when the first kernel runs:
#: ``import judge`` loads neither numba nor llvmlite, so a process that imports judge and never
#: builds an automaton (a vLLM worker re-importing a user's script, say) does not carry them.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None

_PENDING: dict = {}  # name -> the Python function of each kernel not compiled yet
_COMPILE_LOCK = threading.Lock()


def _compile_all() -> None:
    """Swap every kernel in the module for its numba dispatcher (compiled or loaded from the
    on-disk cache on its first call, as before), or for the plain function without numba. All at
    once: a kernel calling another finds its dispatcher among the module's globals."""
    with _COMPILE_LOCK:
        if not _PENDING:
            return
        if HAVE_NUMBA:
            from numba import njit as _njit

            compiled = {name: _njit(cache=True, nogil=True)(f) for name, f in _PENDING.items()}
        else:  # pragma: no cover
            compiled = dict(_PENDING)
        globals().update(compiled)
        _PENDING.clear()


class _Lazy:
    """Stands for a kernel until the first kernel call compiles them all (see :func:`_compile_all`)."""

    def __init__(self, f):
        functools.update_wrapper(self, f)
        self._name = f.__name__

    def __call__(self, *args):
        _compile_all()
        return globals()[self._name](*args)


def njit(f):
    """Mark ``f`` as a kernel: compiled with numba (``cache=True, nogil=True``) on first use.

    Applied by assignment after each kernel (``name = njit(name)``), not as a decorator: mutation
    testing (bench/mutation.py) leaves decorated functions alone, and the loops are what it should
    mutate (they run as Python under ``NUMBA_DISABLE_JIT=1`` there)."""
    _PENDING[f.__name__] = f
    return _Lazy(f)


_BITS32 = (np.uint32(1) << np.arange(32, dtype=np.uint32)).view(np.int32)


def group_by(keys, n_groups):
    """Stable counting sort: (indptr of shape (n_groups + 1,), order of items)."""
    counts = np.zeros(n_groups + 1, np.int64)
    for i in range(keys.shape[0]):
        if keys[i] >= 0:
            counts[keys[i] + 1] += 1
    for g in range(n_groups):
        counts[g + 1] += counts[g]
    indptr = counts.copy()
    fill = counts[:-1].copy()
    order = np.empty(indptr[n_groups], np.int32)
    for i in range(keys.shape[0]):
        g = keys[i]
        if g >= 0:
            order[fill[g]] = i
            fill[g] += 1
    return indptr, order


group_by = njit(group_by)


def _search(keys, values, lo, hi, key):
    """values[i] for the i in [lo, hi) with keys[i] == key (keys sorted there), else -1."""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = keys[mid]
        if v < key:
            lo = mid + 1
        elif v > key:
            hi = mid
        else:
            return values[mid]
    return -1


_search = njit(_search)


def _sort_pairs(toks, dest, start, end, scratch):
    """Sort ``toks[start:end]`` (distinct) with ``dest`` alongside, without allocating."""
    m = end - start
    if m > scratch.shape[0]:
        scratch = np.empty(m, np.int64)
    buf = scratch[:m]
    for i in range(m):
        buf[i] = (np.int64(toks[start + i]) << 32) | np.int64(dest[start + i])
    buf.sort()
    for i in range(m):
        toks[start + i] = np.int32(buf[i] >> 32)
        dest[start + i] = np.int32(buf[i] & 0xFFFFFFFF)


_sort_pairs = njit(_sort_pairs)


def intersect(
    l_cindptr, l_cnodes, l_byte,  # label trie: children CSR and byte into each node
    l_label,  # label index completed at each node, -1 if none
    v_cindptr, v_cbytes, v_cnodes,  # vocabulary trie: children CSR sorted by byte
    v_tindptr, v_tids,  # vocabulary trie: token ids ending at each node
    end_ids,
):
    """Token automaton edges, grouped by source node and sorted by token id.

    For every label-trie node ``n``: walk the label trie below ``n`` and the
    vocabulary trie from its root together; every vocabulary node reached that
    ends a token gives an edge (token, destination). End tokens at complete
    labels lead to the accepting state ``n_nodes + label``.

    :func:`intersect_nodes` over every node, without the subtree classes: what the automaton
    runs where the classes do not pay, and the reference the class path is tested against.
    """
    todo = np.arange(l_cindptr.shape[0] - 1, dtype=np.int64)
    return intersect_nodes(l_cindptr, l_cnodes, l_byte, l_label, v_cindptr, v_cbytes, v_cnodes, v_tindptr,
                           v_tids, end_ids, todo)


intersect = njit(intersect)


def live_nodes(indptr, dest, n_nodes, is_terminal):
    """Nodes from which some label can still be completed (dest > src in preorder)."""
    live = is_terminal.copy()
    for n in range(n_nodes - 1, -1, -1):
        if live[n]:
            continue
        for k in range(indptr[n], indptr[n + 1]):
            d = dest[k]
            if d >= n_nodes or live[d]:
                live[n] = True
                break
    return live


live_nodes = njit(live_nodes)


def prune(indptr, toks, dest, live, n_nodes):
    """Drop edges into dead nodes (from which no label can be completed)."""
    new_ptr = np.zeros(indptr.shape[0], np.int64)
    t2 = np.empty(toks.shape[0], np.int32)
    d2 = np.empty(toks.shape[0], np.int32)
    e = 0
    for n in range(indptr.shape[0] - 1):
        for k in range(indptr[n], indptr[n + 1]):
            d = dest[k]
            if d >= n_nodes or live[d]:
                t2[e] = toks[k]
                d2[e] = d
                e += 1
        new_ptr[n + 1] = e
    return new_ptr, t2[:e].copy(), d2[:e].copy()


prune = njit(prune)


def reachable_nodes(indptr, dest, n_nodes):
    """Nodes reachable from the root through edges (dest > src in preorder)."""
    reach = np.zeros(n_nodes, np.bool_)
    reach[0] = True
    for n in range(n_nodes):
        if not reach[n]:
            continue
        for k in range(indptr[n], indptr[n + 1]):
            d = dest[k]
            if d < n_nodes:
                reach[d] = True
    return reach


reachable_nodes = njit(reachable_nodes)


def fill_bitmask(indptr, toks, nodes, bitmask, n_nodes, n_states, bits):
    """Write packed allowed-token rows (xgrammar's int32 layout); returns -1, or the bad row."""
    words = bitmask.shape[1]
    for r in range(nodes.shape[0]):
        n = nodes[r]
        if n < 0 or n >= n_states:
            return r
        row = bitmask[r]
        for w in range(words):
            row[w] = 0
        if n >= n_nodes:
            continue  # accepting state: nothing more may be emitted
        for k in range(indptr[n], indptr[n + 1]):
            t = toks[k]
            w = t >> 5
            if w < words:
                row[w] |= bits[t & 31]
    return -1


fill_bitmask = njit(fill_bitmask)


def next_state(indptr, toks, dest, node, token):
    """Destination of ``token`` at ``node`` (binary search), -1 if not allowed."""
    return _search(toks, dest, indptr[node], indptr[node + 1], token)


next_state = njit(next_state)


# --------------------------------------------------------------------------- fast compile
def build_trie_msd(data, offsets):
    """Preorder byte trie of the strings ``data[offsets[i]:offsets[i+1]]``, no prior sort.

    A most-significant-byte radix partition that numbers nodes as it goes
    (children in byte order: the numbering of a preorder build over the sorted strings,
    tests/automaton/test_trie.py's reference). Empty strings get ``node_of == -1``.

    Returns parent, byte_in, depth, node_of and ``dup``: -1, or the id of a
    string that ends at the same node as an earlier one (a duplicate).

    Each string's start and length travel beside its id through the partitions (and its byte at
    the current depth is read once per level into ``keys``), so the passes over a group read
    arrays in order instead of through the ids.
    """
    m = offsets.shape[0] - 1
    total = 0
    maxlen = 0
    n_idx = 0
    for s in range(m):
        ls = offsets[s + 1] - offsets[s]
        total += ls
        if ls > maxlen:
            maxlen = ls
        if ls > 0:
            n_idx += 1
    cap = total + 1  # every node is written before it is read: no fill needed
    parent = np.empty(cap, np.int32)
    byte_in = np.empty(cap, np.uint8)
    depth = np.empty(cap, np.int32)
    node_of = np.full(m, -1, np.int32)
    idx = np.empty(n_idx, np.int64)
    pos = np.empty(n_idx, np.int64)   # idx's start offsets, permuted with it
    lng = np.empty(n_idx, np.int64)   # idx's lengths, permuted with it
    j = 0
    for s in range(m):
        if offsets[s + 1] > offsets[s]:
            idx[j] = s
            pos[j] = offsets[s]
            lng[j] = offsets[s + 1] - offsets[s]
            j += 1
    tmp = np.empty(n_idx, np.int64)
    tpos = np.empty(n_idx, np.int64)
    tlng = np.empty(n_idx, np.int64)
    keys = np.empty(n_idx, np.uint8)
    counts = np.zeros(257, np.int64)
    scap = 255 * (maxlen + 1) + 2
    st_lo = np.empty(scap, np.int64)
    st_hi = np.empty(scap, np.int64)
    st_par = np.empty(scap, np.int32)
    st_byte = np.empty(scap, np.uint8)
    st_d = np.empty(scap, np.int32)
    n_nodes = 0
    dup = -1
    st_lo[0] = 0
    st_hi[0] = n_idx
    st_par[0] = -1
    st_byte[0] = 0
    st_d[0] = 0
    sp = 1
    while sp > 0:
        sp -= 1
        lo = st_lo[sp]
        hi = st_hi[sp]
        d = st_d[sp]
        node = n_nodes
        n_nodes += 1
        parent[node] = st_par[sp]
        byte_in[node] = st_byte[sp]
        depth[node] = d
        e = lo
        for k in range(lo, hi):
            if lng[k] == d:
                s = idx[k]
                if e > lo:
                    dup = s
                node_of[s] = node
                idx[k] = idx[e]
                idx[e] = s
                pk = pos[k]
                pos[k] = pos[e]
                pos[e] = pk
                lng[k] = lng[e]
                lng[e] = d
                e += 1
        lo = e
        if hi - lo == 0:
            continue
        if hi - lo == 1:
            s = idx[lo]
            ls = lng[lo]
            p0 = pos[lo]
            prev = node
            for dd in range(d, ls):
                c = n_nodes
                n_nodes += 1
                parent[c] = prev
                byte_in[c] = data[p0 + dd]
                depth[c] = dd + 1
                prev = c
            node_of[s] = prev
            continue
        for k in range(lo, hi):
            keys[k] = data[pos[k] + d]
        if hi - lo <= 32:
            for k in range(lo + 1, hi):
                s = idx[k]
                pk = pos[k]
                lk = lng[k]
                key = keys[k]
                q = k - 1
                while q >= lo and keys[q] > key:
                    idx[q + 1] = idx[q]
                    pos[q + 1] = pos[q]
                    lng[q + 1] = lng[q]
                    keys[q + 1] = keys[q]
                    q -= 1
                idx[q + 1] = s
                pos[q + 1] = pk
                lng[q + 1] = lk
                keys[q + 1] = key
        else:
            for b in range(257):
                counts[b] = 0
            for k in range(lo, hi):
                counts[np.int64(keys[k]) + 1] += 1
            for b in range(256):
                counts[b + 1] += counts[b]
            for k in range(lo, hi):
                b = keys[k]
                t = lo + counts[b]
                tmp[t] = idx[k]
                tpos[t] = pos[k]
                tlng[t] = lng[k]
                counts[b] += 1
            for k in range(lo, hi):
                idx[k] = tmp[k]
                pos[k] = tpos[k]
                lng[k] = tlng[k]
                keys[k] = data[pos[k] + d]
        k = hi
        while k > lo:
            b = keys[k - 1]
            q = k - 1
            while q > lo and keys[q - 1] == b:
                q -= 1
            st_lo[sp] = q
            st_hi[sp] = k
            st_par[sp] = node
            st_byte[sp] = b
            st_d[sp] = d + 1
            sp += 1
            k = q
    return parent[:n_nodes].copy(), byte_in[:n_nodes].copy(), depth[:n_nodes].copy(), node_of, dup


build_trie_msd = njit(build_trie_msd)


def split_joined(data, n):
    """Lengths of the ``n`` strings joined by NUL bytes in ``data`` (ASCII), and whether one is blank.

    Returns ``(lens, blank)``: ``lens`` (n,) int64, empty when ``data`` does not hold exactly
    ``n - 1`` NUL bytes (a string holds one: the caller splits another way); ``blank`` is True
    when a string is empty or only ASCII whitespace (what ``str.isspace`` calls whitespace).
    """
    zeros = 0
    for k in range(data.shape[0]):
        if data[k] == 0:
            zeros += 1
    if zeros != n - 1:
        return np.empty(0, np.int64), False
    lens = np.empty(n, np.int64)
    blank = False
    i = 0
    start = 0
    only_space = True
    for k in range(data.shape[0] + 1):
        c = 0 if k == data.shape[0] else data[k]
        if c == 0:
            lens[i] = k - start
            if only_space:
                blank = True
            i += 1
            start = k + 1
            only_space = True
        elif only_space and not (c == 32 or 9 <= c <= 13 or 28 <= c <= 31):
            only_space = False
    return lens, blank


split_joined = njit(split_joined)


def subtree_classes(child_indptr, child_nodes, byte_in, terminal):
    """Classes of nodes whose subtrees are identical (same bytes, shape and terminals).

    Isomorphic subtrees have the same preorder layout, so a node's edges are
    its class representative's edges shifted by ``node - rep``. Returns
    ``cls`` (class of each node) and ``rep`` (the first node of each class,
    the highest id, since nodes are visited from the leaves up).

    A node with one child (most of a label trie: the rest of a name) is looked up in its child's
    class's short list of (byte, terminal) keys, which stays in cache; the others in a hash table
    over their whole child lists. A class holds nodes of one child count, so the two never meet.
    """
    n = child_indptr.shape[0] - 1
    cls = np.empty(n, np.int32)
    rep = np.empty(n, np.int32)
    chash = np.empty(n, np.int64)
    size = 1
    while size < 2 * n + 2:
        size *= 2
    mask = size - 1
    table = np.full(size, -1, np.int32)
    n_cls = 0
    head = np.full(n, -1, np.int32)  # per class: its one-child parents' first list entry
    e_key = np.empty(n, np.int32)
    e_cls = np.empty(n, np.int32)
    e_next = np.empty(n, np.int32)
    n_e = 0
    for v in range(n - 1, -1, -1):
        a = child_indptr[v]
        b = child_indptr[v + 1]
        if b - a == 1:
            cc = cls[child_nodes[a]]
            key = np.int32(byte_in[child_nodes[a]]) * 2 + np.int32(terminal[v])
            q = head[cc]
            while q >= 0 and e_key[q] != key:
                q = e_next[q]
            if q >= 0:
                cls[v] = e_cls[q]
                continue
            e_key[n_e] = key
            e_cls[n_e] = n_cls
            e_next[n_e] = head[cc]
            head[cc] = n_e
            n_e += 1
            rep[n_cls] = v
            cls[v] = n_cls
            n_cls += 1
            continue
        h = np.int64(b - a) * np.int64(0x9E3779B1) + np.int64(terminal[v])
        for k in range(a, b):
            c = child_nodes[k]
            h = (h ^ (np.int64(byte_in[c]) << 32) ^ np.int64(cls[c])) * np.int64(0x100000001B3)
        h ^= h >> 29
        slot = h & mask
        found = -1
        while True:
            q = table[slot]
            if q < 0:
                break
            if chash[q] == h:
                r = rep[q]
                ra = child_indptr[r]
                if (child_indptr[r + 1] - ra == b - a) and terminal[r] == terminal[v]:
                    same = True
                    for k in range(b - a):
                        c1 = child_nodes[a + k]
                        c2 = child_nodes[ra + k]
                        if byte_in[c1] != byte_in[c2] or cls[c1] != cls[c2]:
                            same = False
                            break
                    if same:
                        found = q
                        break
            slot = (slot + 1) & mask
        if found < 0:
            found = n_cls
            table[slot] = n_cls
            rep[n_cls] = v
            chash[n_cls] = h
            n_cls += 1
        cls[v] = found
    return cls, rep[:n_cls].copy()


subtree_classes = njit(subtree_classes)


def _walk_node(n, l_cindptr, l_cnodes, l_byte, root_next, lvl1, v_cindptr, v_cbytes, v_cnodes,
               v_tindptr, v_tids, toks, dest, e, stack_u, stack_s):
    """Append the edges out of label-trie node ``n`` (unsorted) at ``toks[e:]``, ``dest[e:]``.

    Returns the new end, -1 when the edges do not fit in ``toks``, -2 when the walk outgrows the stack.
    Nothing here reallocates: an array assigned inside a numba loop is reference-counted on every
    pass, which cost more than the walk itself (``intersect_nodes`` grows the arrays and retries)."""
    cap = toks.shape[0]
    stack_u[0] = n
    stack_s[0] = 0
    sp = 1
    while sp > 0:
        sp -= 1
        u = stack_u[sp]
        s = stack_s[sp]
        la = l_cindptr[u]
        lb = l_cindptr[u + 1]
        if sp + lb - la > stack_u.shape[0]:
            return -2
        for k in range(la, lb):
            c = l_cnodes[k]
            b = l_byte[c]
            if s == 0:
                s2 = root_next[b]
            elif s < 0:  # depth-1 vocabulary node, encoded as -(first byte) - 1
                s2 = lvl1[-s - 1, b]
            else:
                s2 = _search(v_cbytes, v_cnodes, v_cindptr[s], v_cindptr[s + 1], b)
            if s2 < 0:
                continue
            j0 = v_tindptr[s2]
            j1 = v_tindptr[s2 + 1]
            if e + j1 - j0 > cap:
                return -1
            for j in range(j0, j1):
                toks[e] = v_tids[j]
                dest[e] = c
                e += 1
            if v_cindptr[s2 + 1] > v_cindptr[s2]:
                if s == 0:
                    s2 = -np.int32(b) - 1
                stack_u[sp] = c
                stack_s[sp] = s2
                sp += 1
    return e


_walk_node = njit(_walk_node)


def _sort_slice(toks, dest, start, end, scratch):
    """Sort ``toks[start:end]`` (distinct) with ``dest`` alongside: insertion sort where short."""
    if end - start > 24:
        _sort_pairs(toks, dest, start, end, scratch)
        return
    for a in range(start + 1, end):
        tv = toks[a]
        dv = dest[a]
        j = a - 1
        while j >= start and toks[j] > tv:
            toks[j + 1] = toks[j]
            dest[j + 1] = dest[j]
            j -= 1
        toks[j + 1] = tv
        dest[j + 1] = dv


_sort_slice = njit(_sort_slice)


def _edges_from(i0, todo, l_cindptr, l_cnodes, l_byte, l_label, root_next, lvl1, v_cindptr, v_cbytes,
                v_cnodes, v_tindptr, v_tids, end_ids, toks, dest, indptr, stack_u, stack_s, scratch):
    """Edges of ``todo[i0:]`` written (sorted per node) until an array is full.

    Returns ``(i, status)``: the first node not written and 0 when all were, -1 when ``toks`` is
    full, -2 when the stack is."""
    n_nodes = l_cindptr.shape[0] - 1
    ne = end_ids.shape[0]
    cap = toks.shape[0]
    e = indptr[i0]
    for i in range(i0, todo.shape[0]):
        n = todo[i]
        start = e
        e = _walk_node(n, l_cindptr, l_cnodes, l_byte, root_next, lvl1, v_cindptr, v_cbytes, v_cnodes,
                       v_tindptr, v_tids, toks, dest, e, stack_u, stack_s)
        if e < 0:
            return i, e
        lab = l_label[n]
        if lab >= 0:
            if e + ne > cap:
                return i, -1
            for j in range(ne):
                toks[e] = end_ids[j]
                dest[e] = n_nodes + lab
                e += 1
        _sort_slice(toks, dest, start, e, scratch)
        indptr[i + 1] = e
    return todo.shape[0], 0


_edges_from = njit(_edges_from)


def intersect_nodes(
    l_cindptr, l_cnodes, l_byte, l_label,
    v_cindptr, v_cbytes, v_cnodes, v_tindptr, v_tids,
    end_ids, todo,
):
    """:func:`intersect` for the label-trie nodes ``todo`` only (CSR over ``todo``'s order)."""
    n_nodes = l_cindptr.shape[0] - 1
    root_next = np.full(256, -1, np.int32)
    for k in range(v_cindptr[0], v_cindptr[1]):
        root_next[v_cbytes[k]] = v_cnodes[k]
    lvl1 = np.full((256, 256), -1, np.int32)
    for b1 in range(256):
        s1 = root_next[b1]
        if s1 >= 0:
            for k in range(v_cindptr[s1], v_cindptr[s1 + 1]):
                lvl1[b1, v_cbytes[k]] = v_cnodes[k]
    n_todo = todo.shape[0]
    cap = 4 * n_todo + 16
    toks = np.empty(cap, np.int32)
    dest = np.empty(cap, np.int32)
    indptr = np.zeros(n_todo + 1, np.int64)
    stack_u = np.empty(1024, np.int32)
    stack_s = np.empty(1024, np.int32)
    scratch = np.empty(n_nodes + 64, np.int64)
    i = 0
    while True:
        i, status = _edges_from(i, todo, l_cindptr, l_cnodes, l_byte, l_label, root_next, lvl1,
                                v_cindptr, v_cbytes, v_cnodes, v_tindptr, v_tids, end_ids, toks, dest, indptr,
                                stack_u, stack_s, scratch)
        if status == 0:
            break
        if status == -2:  # a walk outgrew the stack: double it, then redo that node
            stack_u = np.empty(2 * stack_u.shape[0], np.int32)
            stack_s = np.empty(2 * stack_s.shape[0], np.int32)
            continue
        e = indptr[i]  # the edge tables are full: double them, keep the nodes written, redo node i
        cap = 2 * cap + 1024
        t2 = np.empty(cap, np.int32)
        d2 = np.empty(cap, np.int32)
        t2[:e] = toks[:e]
        d2[:e] = dest[:e]
        toks = t2
        dest = d2
    e = indptr[n_todo]
    return indptr, toks[:e].copy(), dest[:e].copy()


intersect_nodes = njit(intersect_nodes)


def expand_classes(cls, rep, r_indptr, r_toks, r_dest, node_label, n_nodes):
    """Every node's edges from its class representative's (``r_*``: CSR over ``rep``)."""
    n = cls.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    for v in range(n):
        c = cls[v]
        indptr[v + 1] = indptr[v] + r_indptr[c + 1] - r_indptr[c]
    e_total = indptr[n]
    toks = np.empty(e_total, np.int32)
    dest = np.empty(e_total, np.int32)
    for v in range(n):
        c = cls[v]
        off = v - rep[c]
        e = indptr[v]
        for k in range(r_indptr[c], r_indptr[c + 1]):
            toks[e] = r_toks[k]
            d = r_dest[k]
            dest[e] = n_nodes + node_label[v] if d >= n_nodes else d + off
            e += 1
    return indptr, toks, dest


expand_classes = njit(expand_classes)


def _fill_rows(tab, nodes, bitmask):
    """Packed rows from the automaton's single table (see ``TrieAutomaton._tab``).

    ``tab`` = [n_nodes, n_states, words, indptr (n_nodes + 1 entries), token ids].
    Returns -1, -2 when ``bitmask`` is too small, or the first bad row.
    See :func:`fill_rows` for the argument types.
    """
    n_nodes = tab[0]
    n_states = tab[1]
    words = bitmask.shape[1]
    if bitmask.shape[0] < nodes.shape[0] or words < tab[2]:
        return -2
    base = 3 + n_nodes + 1
    for r in range(nodes.shape[0]):
        n = nodes[r]
        if n < 0 or n >= n_states:
            return r
        row = bitmask[r]
        row[:] = 0
        if n >= n_nodes:
            continue
        for k in range(tab[3 + n], tab[4 + n]):
            t = tab[base + k]
            w = t >> 5
            if w < words:
                row[w] |= _BITS32[t & 31]
    return -1


def mask_rows(tab, ends, logits, rows, nodes, neg):
    """Mask a batch of logits rows in place: what :func:`_fill_rows` then a bitmask kernel do, in one pass.

    ``logits`` is a 2-D array (the raw bits of float logits: int32 for float32, int16 for
    (b)float16) and ``neg`` the bit pattern of -inf in that dtype. Row ``rows[i]`` keeps the
    tokens allowed at automaton state ``nodes[i]`` (``tab`` as in :func:`_fill_rows`); a state
    that is no trie node (negative: off the automaton; an accepting state) keeps only ``ends``
    (sorted). Every other column of the row becomes ``neg``; columns at or past the vocabulary
    (padded logits) too, and allowed tokens past ``logits.shape[1]`` are ignored. Between two
    allowed tokens the row is filled as one run, so a step costs a fill of the rows plus one
    read of their allowed tokens (sorted in ``tab``).

    Returns -1, or the first ``i`` whose row is outside ``logits`` (nothing masked from there on).
    """
    n_nodes = tab[0]
    base = 3 + n_nodes + 1
    B = logits.shape[0]
    V = logits.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        if r < 0 or r >= B:
            return i
        row = logits[r]
        n = nodes[i]
        prev = 0
        if 0 <= n < n_nodes:
            for k in range(tab[3 + n], tab[4 + n]):
                t = tab[base + k]
                if t >= V:
                    break
                if t >= prev:
                    row[prev:t] = neg
                    prev = t + 1
        else:
            for k in range(ends.shape[0]):
                t = ends[k]
                if t >= V:
                    break
                if t >= prev:
                    row[prev:t] = neg
                    prev = t + 1
        row[prev:V] = neg
    return -1


mask_rows = njit(mask_rows)


def _jit_disabled() -> bool:
    from numba.core import config

    return bool(config.DISABLE_JIT)


def fill_rows(tab, nodes, bitmask):  # noqa: F811 - replaces itself on the first call
    """:func:`_fill_rows` compiled for exactly (writeable int32 ``tab``, int64 ``nodes``,
    int32 2-D ``bitmask``): other argument types raise ``TypeError`` instead of
    compiling a new version, so callers try it first and check only on failure.
    ``tab`` is writeable because numba's dispatcher types a read-only array on its slow
    path (about 100 ns more per call, a sixth of a fill).

    Compiled (or loaded from the cache) on the first call, which replaces this
    function in the module.
    """
    global fill_rows
    if HAVE_NUMBA and not _jit_disabled():
        from numba import njit as _njit
        from numba import types as T

        tab_t = T.Array(T.int32, 1, "C")
        sigs = [T.int64(tab_t, T.Array(T.int64, 1, a), T.Array(T.int32, 2, b))
                for a, b in (("C", "C"), ("A", "A"))]
        fill_rows = _njit(sigs, cache=True, nogil=True)(_fill_rows)
    else:  # pragma: no cover
        def _checked(tab, nodes, bitmask):
            for a, dt, nd in ((nodes, np.int64, 1), (bitmask, np.int32, 2)):
                if type(a) is not np.ndarray or a.dtype != dt or a.ndim != nd:
                    raise TypeError("fill_rows: expected int64 nodes and an int32 2-D bitmask")
            return _fill_rows(tab, nodes, bitmask)

        fill_rows = _checked
    return fill_rows(tab, nodes, bitmask)


# --------------------------------------------------------------------------- token classes
def token_classes(indptr, toks, dest, vocab_size):
    """Partition the tokens by their column (the (node, destination) pairs where allowed).

    Returns ``class_of`` (per token; classes numbered by their smallest token),
    and the number of classes. Tokens allowed nowhere share one class.
    Columns are compared exactly (hashes only pick candidates).
    """
    n_nodes = indptr.shape[0] - 1
    n_edges = toks.shape[0]
    cnt = np.zeros(vocab_size + 1, np.int64)
    for k in range(n_edges):
        cnt[toks[k] + 1] += 1
    for t in range(vocab_size):
        cnt[t + 1] += cnt[t]
    t_ptr = cnt.copy()
    fill = cnt[:-1].copy()
    t_node = np.empty(n_edges, np.int32)
    t_dest = np.empty(n_edges, np.int32)
    for n in range(n_nodes):
        for k in range(indptr[n], indptr[n + 1]):
            t = toks[k]
            t_node[fill[t]] = n
            t_dest[fill[t]] = dest[k]
            fill[t] += 1
    h = np.empty(vocab_size, np.int64)
    for t in range(vocab_size):
        x = np.int64(t_ptr[t + 1] - t_ptr[t]) * np.int64(0x9E3779B1)
        for k in range(t_ptr[t], t_ptr[t + 1]):
            x = (x ^ (np.int64(t_node[k]) << 21) ^ np.int64(t_dest[k])) * np.int64(0x100000001B3)
        h[t] = x ^ (x >> 31)
    order = np.argsort(h, kind="mergesort")  # stable: equal hashes keep token order
    tmp = np.full(vocab_size, -1, np.int64)
    reps = np.empty(vocab_size, np.int64)
    n_tmp = 0
    i = 0
    while i < vocab_size:
        j = i
        while j < vocab_size and h[order[j]] == h[order[i]]:
            j += 1
        first = n_tmp  # classes created for this hash run
        for q in range(i, j):
            t = order[q]
            a = t_ptr[t]
            la = t_ptr[t + 1] - a
            for c in range(first, n_tmp):
                r = reps[c]
                b = t_ptr[r]
                if t_ptr[r + 1] - b != la:
                    continue
                same = True
                for k in range(la):
                    if t_node[a + k] != t_node[b + k] or t_dest[a + k] != t_dest[b + k]:
                        same = False
                        break
                if same:
                    tmp[t] = c
                    break
            if tmp[t] < 0:
                reps[n_tmp] = t
                tmp[t] = n_tmp
                n_tmp += 1
        i = j
    remap = np.full(n_tmp, -1, np.int32)
    class_of = np.empty(vocab_size, np.int32)
    n_cls = 0
    for t in range(vocab_size):
        c = tmp[t]
        if remap[c] < 0:
            remap[c] = n_cls
            n_cls += 1
        class_of[t] = remap[c]
    return class_of, n_cls


token_classes = njit(token_classes)


def class_edges(indptr, toks, dest, class_of, rep_of_class):
    """Per node, the classes allowed there (one edge per class, at its smallest token)."""
    n_nodes = indptr.shape[0] - 1
    c_ptr = np.zeros(n_nodes + 1, np.int64)
    c_ids = np.empty(toks.shape[0], np.int32)
    c_dest = np.empty(toks.shape[0], np.int32)
    e = 0
    for n in range(n_nodes):
        for k in range(indptr[n], indptr[n + 1]):
            t = toks[k]
            c = class_of[t]
            if rep_of_class[c] == t:
                c_ids[e] = c
                c_dest[e] = dest[k]
                e += 1
        c_ptr[n + 1] = e
    return c_ptr, c_ids[:e].copy(), c_dest[:e].copy()


class_edges = njit(class_edges)


def fill_from_classes(c_ptr, c_ids, m_ptr, m_toks, nodes, n_nodes, bitmask):
    """Packed rows by expanding each allowed class into its member tokens (CSR ``m_*``)."""
    words = bitmask.shape[1]
    for r in range(nodes.shape[0]):
        n = nodes[r]
        row = bitmask[r]
        row[:] = 0
        if n >= n_nodes:
            continue
        for k in range(c_ptr[n], c_ptr[n + 1]):
            c = c_ids[k]
            for j in range(m_ptr[c], m_ptr[c + 1]):
                t = m_toks[j]
                w = t >> 5
                if w < words:
                    row[w] |= _BITS32[t & 31]


fill_from_classes = njit(fill_from_classes)


def class_bit_table(c_ptr, c_ids, n_classes):
    """Per node, the allowed classes as packed bits: shape (n_nodes, ceil(n_classes / 32))."""
    n_nodes = c_ptr.shape[0] - 1
    cw = (n_classes + 31) // 32
    table = np.zeros((n_nodes, cw), np.int32)
    for n in range(n_nodes):
        for k in range(c_ptr[n], c_ptr[n + 1]):
            c = c_ids[k]
            table[n, c >> 5] |= _BITS32[c & 31]
    return table


class_bit_table = njit(class_bit_table)
