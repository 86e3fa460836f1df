"""Compiled inner loops of the trie automaton (numba when installed, plain Python otherwise).

Every function here is a plain loop over numpy arrays. With numba installed
(a declared dependency) they are compiled once and cached on disk; without it
they run as ordinary Python, slower but identical, which is also how the tests
check the compiled and the interpreted versions agree (``NUMBA_DISABLE_JIT=1``).

Nothing here knows about tokenizers or labels; :mod:`judge.trie` does.
"""

from __future__ import annotations

import numpy as np

try:  # pragma: no cover - exercised implicitly
    from numba import njit as _njit

    def njit(f):
        return _njit(cache=True, nogil=True)(f)

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(f):
        return f


@njit
def build_trie(data, offsets, order, lengths):
    """Preorder byte trie of the strings ``order`` (sorted lexicographically).

    Returns parent, byte_in, depth (per node), node_of (per string id, -1 for
    strings not in ``order``) and the number of nodes.
    """
    total = 0
    maxlen = 0
    for k in range(order.shape[0]):
        s = order[k]
        total += lengths[s]
        if lengths[s] > maxlen:
            maxlen = lengths[s]
    cap = total + 1
    parent = np.full(cap, -1, np.int32)
    byte_in = np.zeros(cap, np.uint8)
    depth = np.zeros(cap, np.int32)
    node_of = np.full(lengths.shape[0], -1, np.int32)
    path = np.zeros(maxlen + 1, np.int32)
    n_nodes = 1
    prev = -1
    for k in range(order.shape[0]):
        s = order[k]
        ls = lengths[s]
        lcp = 0
        if prev >= 0:
            lp = lengths[prev]
            m = min(ls, lp)
            a = offsets[s]
            b = offsets[prev]
            while lcp < m and data[a + lcp] == data[b + lcp]:
                lcp += 1
        for d in range(lcp + 1, ls + 1):
            n = n_nodes
            n_nodes += 1
            parent[n] = path[d - 1]
            byte_in[n] = data[offsets[s] + d - 1]
            depth[n] = d
            path[d] = n
        node_of[s] = path[ls]
        prev = s
    return parent[:n_nodes].copy(), byte_in[:n_nodes].copy(), depth[:n_nodes].copy(), node_of


@njit
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


@njit
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


@njit
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
    """
    n_nodes = l_cindptr.shape[0] - 1
    root_next = np.full(256, -1, np.int32)
    for k in range(v_cindptr[0], v_cindptr[1]):
        root_next[v_cbytes[k]] = v_cnodes[k]
    # dense transitions out of the depth-1 vocabulary nodes (at most 256 x 256)
    lvl1 = np.full((256, 256), -1, np.int32)
    for b1 in range(256):
        s1 = root_next[b1]
        if s1 >= 0:
            for k in range(v_cindptr[s1], v_cindptr[s1 + 1]):
                lvl1[b1, v_cbytes[k]] = v_cnodes[k]
    cap = 4 * n_nodes + 16
    toks = np.empty(cap, np.int32)
    dest = np.empty(cap, np.int32)
    indptr = np.zeros(n_nodes + 1, np.int64)
    stack_u = np.empty(64, np.int32)
    stack_s = np.empty(64, np.int32)
    e = 0
    for n in range(n_nodes):
        start = e
        sp = 0
        stack_u[0] = n
        stack_s[0] = 0
        sp = 1
        while sp > 0:
            sp -= 1
            u = stack_u[sp]
            s = stack_s[sp]
            for k in range(l_cindptr[u], l_cindptr[u + 1]):
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
                nt = v_tindptr[s2 + 1] - v_tindptr[s2]
                if e + nt > cap:
                    cap = 2 * cap + nt
                    t2 = np.empty(cap, np.int32)
                    d2 = np.empty(cap, np.int32)
                    t2[:e] = toks[:e]
                    d2[:e] = dest[:e]
                    toks = t2
                    dest = d2
                for j in range(v_tindptr[s2], v_tindptr[s2 + 1]):
                    toks[e] = v_tids[j]
                    dest[e] = c
                    e += 1
                if v_cindptr[s2 + 1] > v_cindptr[s2]:
                    if s == 0:
                        s2 = -np.int32(b) - 1
                    if sp == stack_u.shape[0]:
                        su = np.empty(2 * sp, np.int32)
                        ss = np.empty(2 * sp, np.int32)
                        su[:sp] = stack_u[:sp]
                        ss[:sp] = stack_s[:sp]
                        stack_u = su
                        stack_s = ss
                    stack_u[sp] = c
                    stack_s[sp] = s2
                    sp += 1
        lab = l_label[n]
        if lab >= 0:
            ne = end_ids.shape[0]
            if e + ne > cap:
                cap = 2 * cap + ne
                t2 = np.empty(cap, np.int32)
                d2 = np.empty(cap, np.int32)
                t2[:e] = toks[:e]
                d2[:e] = dest[:e]
                toks = t2
                dest = d2
            for j in range(ne):
                toks[e] = end_ids[j]
                dest[e] = n_nodes + lab
                e += 1
        if e - start > 24:
            o = np.argsort(toks[start:e], kind="mergesort")
            tt = toks[start:e][o]
            dd = dest[start:e][o]
            toks[start:e] = tt
            dest[start:e] = dd
        else:  # insertion sort: slices are short at almost every node
            for i in range(start + 1, e):
                tv = toks[i]
                dv = dest[i]
                j = i - 1
                while j >= start and toks[j] > tv:
                    toks[j + 1] = toks[j]
                    dest[j + 1] = dest[j]
                    j -= 1
                toks[j + 1] = tv
                dest[j + 1] = dv
        indptr[n + 1] = e
    return indptr, toks[:e].copy(), dest[:e].copy()


@njit
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


@njit
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


@njit
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


@njit
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


@njit
def next_state(indptr, toks, dest, node, token):
    """Destination of ``token`` at ``node`` (binary search), -1 if not allowed."""
    return _search(toks, dest, indptr[node], indptr[node + 1], token)
