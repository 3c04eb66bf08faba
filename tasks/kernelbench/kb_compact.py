"""Writing a converted reference within the task format's limits (32 KiB, 1,000 lines).

torch.fx unrolls forward()'s Python loops and inlines every submodule, so a recurrent cell run for
256 steps is 256 copies of its statements, and a network of many alike layers repeats the same
lines with other weights. When the straight-line reference is over a limit (and only then: a
reference that fits is written as it was traced), render() writes it more compactly, each step
giving the same values, until it fits:

1. a statement that only copies another value goes (later ones read the value itself);
2. a torch.cat over a list that extends the list of an earlier torch.cat on the same dim
   concatenates that earlier result and the new tensors (DenseNet's growing feature lists);
3. statements repeated step after step, each step reading only its own values, the step before
   and values from before the loop, become a TorchScript `for` loop (an index that grows by the
   same amount each step is the loop's; results read after the loop are its last step's, or a
   list of every step's, e.g. for torch.stack);
4. a run of statements that recurs with other arguments (the same layer with other weights)
   becomes a helper function, defined before forward() and called where the run was.

Statements are Stmt objects whose names are tokens (TOKEN: "\\x01<number>\\x01", the Emitter's
table gives the names), so that steps can be renamed and moved.
"""
import re

import torch

TOKEN = re.compile("\x01(\\d+)\x01")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![\w.])")
CAT = re.compile("torch\\.cat\\(\\[((?:\x01\\d+\x01, )*\x01\\d+\x01)\\](.*)\\)")
MAX_LOOP_PERIOD = 64      # statements in one loop step, at most
MIN_LOOP_STEPS = 3
MAX_HELPER_STATEMENTS = 24


class Stmt:
    """`var = expr` (var: one token, or tokens joined by ", " for a tuple a helper returns), or a
    line of its own (`head`), or a `for` loop (`head` and `body`)."""

    def __init__(self, var=None, expr=None, notes=(), head=None, body=None):
        self.var, self.expr, self.notes, self.head, self.body = var, expr, list(notes), head, body

    def flat(self):
        return self.body is None and self.var is not None

    def defined(self):
        return [m.group(0) for m in TOKEN.finditer(self.var)] if self.var is not None else []

    def texts(self):
        """Every text of the statement that reads values."""
        out = [t for t in (self.expr, self.head) if t is not None]
        for s in self.body or ():
            out += s.texts()
        return out


def render(em, header, stmts, ret, arg_tokens):
    """(source, what was done to fit or None): the reference's text; compacted when the straight
    one is over the task's limits."""
    from kb_toml import reference_problem
    source = _source(em, [], header, stmts, ret)
    why = reference_problem(source)
    if why is None:
        return source, None
    ctx = _Context(em, arg_tokens)
    done, helpers = [], []
    steps = (("copies dropped", _drop_copies), ("growing concatenations chained", _chain_cats),
             ("repeated steps written as loops", _roll_loop),
             ("repeated layers written as helper functions", _outline))
    for what, step in steps:
        while True:  # one change at a time, until the reference fits
            stmts, ret, changed = step(ctx, stmts, ret, helpers)
            if not changed:
                break
            if what not in done:
                done.append(what)
            source = _source(em, helpers, header, stmts, ret)
            if reference_problem(source) is None:
                return source, {"straight": why, "done": done}
    return source, {"straight": why, "done": done}


def _source(em, helpers, header, stmts, ret):
    from kb_emit import wrap
    lines = []
    for h in helpers:
        lines += h + [""]
    lines.append(header)
    lines += _lines(em, stmts, 4)
    lines.append(wrap(f"    return {em.detok(ret)}"))
    return "\n".join(lines) + "\n"


def _lines(em, stmts, indent, names=None):
    from kb_emit import wrap
    detok = em.detok if names is None else (lambda t: TOKEN.sub(lambda m: names[m.group(0)], t))
    pad, out = " " * indent, []
    for s in stmts:
        if s.body is not None:
            out.append(pad + detok(s.head))
            out += _lines(em, s.body, indent + 4, names)
        elif s.var is None:
            out.append(wrap(pad + detok(s.head)))
        else:
            note = f"  # {', '.join(s.notes)}" if s.notes else ""
            out.append(wrap(f"{pad}{detok(s.var)} = {detok(s.expr)}") + note)
    return out


class _Context:
    def __init__(self, em, arg_tokens):
        self.em, self.args = em, arg_tokens

    def new(self, name):
        from kb_emit import sanitize
        return self.em.tok(sanitize(name, self.em.taken))

    def type_of(self, token):
        """The TorchScript type of a token's value, or None where kforge does not know it."""
        if token in self.args:
            return "Tensor"
        from kb_trace import VALUE
        node = self.em.token_node.get(token)
        v = node.meta.get(VALUE) if node is not None else None
        if isinstance(v, torch.Tensor):
            return "Tensor"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float):
            return "float"
        if isinstance(v, (tuple, list)) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return "List[int]"
        return None


def _subst(text, table):
    return TOKEN.sub(lambda m: table.get(m.group(0), m.group(0)), text)


def _subst_all(stmts, ret, table):
    for s in stmts:
        _subst_stmt(s, table)
    return _subst(ret, table)


def _subst_stmt(s, table):
    if s.expr is not None:
        s.expr = _subst(s.expr, table)
    if s.head is not None:
        s.head = _subst(s.head, table)
    for b in s.body or ():
        _subst_stmt(b, table)


# ---- 1. copies ---------------------------------------------------------------------------------
def _drop_copies(ctx, stmts, ret, helpers):
    if getattr(ctx, "copies_dropped", False):
        return stmts, ret, False
    ctx.copies_dropped = True
    table, out = {}, []
    for s in stmts:
        if s.flat():
            s.expr = _subst(s.expr, table)
            if TOKEN.fullmatch(s.expr) and len(s.defined()) == 1:
                table[s.var] = s.expr
                continue
        else:
            _subst_stmt(s, table)
        out.append(s)
    return out, _subst(ret, table), bool(table)


# ---- 2. growing concatenations -----------------------------------------------------------------
def _chain_cats(ctx, stmts, ret, helpers):
    if getattr(ctx, "cats_chained", False):
        return stmts, ret, False
    ctx.cats_chained = True
    seen, changed = [], False
    for s in stmts:
        m = CAT.fullmatch(s.expr) if s.flat() else None
        if not m or TOKEN.search(m.group(2)):
            continue
        items, rest = m.group(1).split(", "), m.group(2)
        best = None
        for lst, r, var in seen:
            if r == rest and 2 <= len(lst) < len(items) and items[:len(lst)] == lst and (
                    best is None or len(lst) > len(best[0])):
                best = (lst, var)
        seen.append((items, rest, s.var))
        if best is not None:
            s.expr = f"torch.cat([{', '.join([best[1]] + items[len(best[0]):])}]{rest})"
            changed = True
    return stmts, ret, changed


# ---- statements as shapes: their text with values and integers taken out -------------------------
def _skeleton(expr):
    """(text with each token as \\x02 and each integer literal as \\x03, tokens, integers)."""
    refs = TOKEN.findall(expr)
    refs = [f"\x01{r}\x01" for r in refs]
    body = TOKEN.sub("\x02", expr)
    ints = []

    def number(m):
        t = m.group(1)
        if t.isdigit():
            ints.append(int(t))
            return "\x03"
        return t
    return NUMBER.sub(number, body), refs, ints


def _definitions(stmts):
    defs = {}
    for i, s in enumerate(stmts):
        for t in s.defined():
            defs[t] = i
    return defs


# ---- 3. loops ----------------------------------------------------------------------------------
def _roll_loop(ctx, stmts, ret, helpers):
    loop = _best_loop(ctx, stmts, ret)
    if loop is None:
        return stmts, ret, False
    stmts, ret = _apply_loop(ctx, stmts, ret, loop)
    return stmts, ret, True


def _block(stmts, defs, skel, region, start, p, first):
    """Each statement of the step at `start` as (skeleton, refs, ints): a ref is ("in", q) (this
    step's statement q), ("prev", q) (the step before's), or ("out", token) (from before the
    loop); None where the step reads another step's values."""
    out = []
    for q in range(p):
        i = start + q
        s = stmts[i]
        if not s.flat() or len(s.defined()) != 1:
            return None
        text, refs, ints = skel[i]
        kinds = []
        for t in refs:
            j = defs.get(t)
            if j is not None and start <= j < start + p:
                kinds.append(("in", j - start))
            elif j is not None and not first and start - p <= j < start:
                kinds.append(("prev", j - (start - p)))
            elif j is not None and j >= region:
                return None
            else:
                kinds.append(("out", t))
        out.append((text, kinds, ints))
    return out


def _loop_at(stmts, defs, skel, b, p):
    """The longest loop starting at b with steps of p statements: (k, carried {q: init token},
    ints [(q, n, v0, d)]), or None."""
    b0 = _block(stmts, defs, skel, b, b, p, True)
    if b0 is None or b + 2 * p > len(stmts):
        return None
    b1 = _block(stmts, defs, skel, b, b + p, p, False)
    if b1 is None:
        return None
    carried = {}
    for q, ((t0, k0, _), (t1, k1, _)) in enumerate(zip(b0, b1)):
        if t0 != t1 or len(k0) != len(k1):
            return None
        for a, c in zip(k0, k1):
            if a == c:
                continue
            if c[0] == "prev" and a[0] == "out" and carried.get(c[1], a[1]) == a[1] and q <= c[1]:
                carried[c[1]] = a[1]
                continue
            return None
    for q, (_, k1, _) in enumerate(b1):  # a step reads the step before only where it is carried
        for c in k1:
            if c[0] == "prev" and c[1] not in carried:
                return None
    blocks = [b0, b1]
    while b + (len(blocks) + 1) * p <= len(stmts):
        nxt = _block(stmts, defs, skel, b, b + len(blocks) * p, p, False)
        if nxt is None or [(t, k) for t, k, _ in nxt] != [(t, k) for t, k, _ in b1]:
            break
        blocks.append(nxt)
    # integers: the same in every step, or growing by the same amount
    while len(blocks) >= 2:
        ints, ok = [], True
        for q in range(p):
            for n in range(len(blocks[0][q][2])):
                vals = [blk[q][2][n] for blk in blocks]
                d = vals[1] - vals[0]
                if any(vals[i] != vals[0] + i * d for i in range(len(vals))):
                    ok = False
                    break
                if d:
                    ints.append((q, n, vals[0], d))
            if not ok:
                break
        if ok:
            return len(blocks), carried, ints
        blocks.pop()  # an integer that stops growing evenly: a shorter loop
    return None


def _best_loop(ctx, stmts, ret):
    defs = _definitions(stmts)
    skel = [_skeleton(s.expr) if s.flat() else (None, [], []) for s in stmts]
    best, covered = None, {}
    for b in range(len(stmts)):
        if not stmts[b].flat():
            continue
        found = []
        for p in range(1, min(MAX_LOOP_PERIOD, (len(stmts) - b) // 2) + 1):
            if skel[b][0] != skel[b + p][0] or covered.get(p, -1) > b or any(p % f == 0 for f in found):
                continue
            r = _loop_at(stmts, defs, skel, b, p)
            if r is None:
                continue
            k, carried, ints = r
            found.append(p)
            if k < MIN_LOOP_STEPS:
                continue
            covered[p] = b + k * p
            plan = _loop_uses(ctx, stmts, ret, defs, b, p, k, carried)
            if plan is None:
                continue
            saved = sum(len(stmts[i].expr) for i in range(b + p, b + k * p))
            if best is None or saved > best[0]:
                best = (saved, (b, p, k, carried, ints, plan))
    return best[1] if best else None


def _loop_uses(ctx, stmts, ret, defs, b, p, k, carried):
    """How the statements after the loop read its values: {"lists": {q: list text}} for the
    lists of every step's value q, or None where they read another step's value than the last's
    of a carried one (or values of a type kforge does not know)."""
    end = b + k * p
    region = {t for i in range(b, end) for t in stmts[i].defined()}
    last = {stmts[end - p + q].var: q for q in range(p)}
    lists = {}
    for q in range(p):
        text = "[" + ", ".join(stmts[b + i * p + q].var for i in range(k)) + "]"
        lists[q] = text
    later = [t for s in stmts[end:] for t in s.texts()] + [ret]
    used_lists = set()
    for text in later:
        for q, lt in lists.items():
            if lt in text:
                used_lists.add(q)
                text = text.replace(lt, "")
        for t in TOKEN.findall(text):
            t = f"\x01{t}\x01"
            if t in region and (t not in last or last[t] not in carried):
                return None
    for q in carried:
        init = carried[q]
        if ctx.type_of(stmts[b + q].var) != "Tensor" or ctx.type_of(init) != "Tensor":
            return None
    for q in used_lists:
        if ctx.type_of(stmts[b + q].var) != "Tensor":
            return None
    return {"lists": {q: lists[q] for q in used_lists}}


def _apply_loop(ctx, stmts, ret, loop):
    b, p, k, carried, ints, plan = loop
    body_vars = [stmts[b + q].var for q in range(p)]
    index = ctx.new("step")
    growing = {(q, n): (v0, d) for q, n, v0, d in ints}
    body, defs = [], _definitions(stmts)
    for q in range(p):
        s = stmts[b + p + q]  # the second step: its refs say which are carried
        text, refs, _ = _skeleton(s.expr)
        values = []
        for r1 in refs:
            j = defs.get(r1)
            if j is not None and b + p <= j < b + 2 * p:
                values.append(body_vars[j - b - p])
            elif j is not None and b <= j < b + p:
                values.append(body_vars[j - b])
            else:
                values.append(r1)
        it = iter(values)
        text = text.replace("\x02", "\x00")
        out, n = [], 0
        for c in text:
            if c == "\x00":
                out.append(next(it))
            elif c == "\x03":
                v0, d = growing.get((q, n), (_skeleton(stmts[b + q].expr)[2][n], 0))
                out.append(_index_text(v0, d, index))
                n += 1
            else:
                out.append(c)
        body.append(Stmt(body_vars[q], "".join(out), stmts[b + q].notes))
    head = []
    for q in sorted(carried):
        head.append(Stmt(body_vars[q], carried[q]))
    lists = {}
    for q in sorted(plan["lists"]):
        lists[q] = ctx.new(ctx.em.detok(body_vars[q]) + "_steps")
        head.append(Stmt(head=f"{lists[q]}: List[Tensor] = []"))
        body.append(Stmt(head=f"{lists[q]}.append({body_vars[q]})"))
    loop = Stmt(head=f"for {index} in range({k}):", body=body)
    end = b + k * p
    table = {stmts[end - p + q].var: body_vars[q] for q in carried}
    rest = stmts[end:]
    for s in rest:
        _replace_lists(s, plan["lists"], lists)
    ret = _replace_text(ret, plan["lists"], lists)
    ret = _subst_all(rest, ret, table)
    return stmts[:b] + head + [loop] + rest, ret


def _replace_text(text, texts, names):
    for q, lt in texts.items():
        text = text.replace(lt, names[q])
    return text


def _replace_lists(s, texts, names):
    if s.expr is not None:
        s.expr = _replace_text(s.expr, texts, names)
    if s.head is not None:
        s.head = _replace_text(s.head, texts, names)
    for b in s.body or ():
        _replace_lists(b, texts, names)


def _index_text(v0, d, index):
    if d == 0:
        return str(v0)
    if v0 == 0 and d == 1:
        return index
    step = index if abs(d) == 1 else f"{abs(d)} * {index}"
    if v0 == 0:
        return f"({step})" if d > 0 else f"(-{step})"
    return f"({v0} {'+' if d > 0 else '-'} {step})"


# ---- 4. helper functions -----------------------------------------------------------------------
def _outline(ctx, stmts, ret, helpers):
    found = _best_helper(ctx, stmts, ret)
    if found is None:
        return stmts, ret, False
    return _apply_helper(ctx, stmts, found, helpers), ret, True


def _window(stmts, defs, shapes, s, p):
    """The run of p statements at s as a shape: ((text with its values as \\x02, refs as ("in",
    q) or "arg") per statement, the tokens of its "arg" refs in order); None where it cannot be
    a helper. shapes[i]: statement i's (text, tokens), None for one that cannot be in a helper."""
    shape, args = [], []
    for q in range(p):
        if shapes[s + q] is None:
            return None
        text, refs = shapes[s + q]
        kinds = []
        for t in refs:
            j = defs.get(t)
            if j is not None and s <= j < s + q:
                kinds.append(("in", j - s))
            else:
                args.append(t)
                kinds.append("arg")
        shape.append((text, tuple(kinds)))
    return tuple(shape), args


def _shapes(stmts):
    return [(TOKEN.sub("\x02", st.expr), [f"\x01{t}\x01" for t in TOKEN.findall(st.expr)])
            if st.flat() and len(st.defined()) == 1 else None for st in stmts]


def _outputs(stmts, uses, s, p):
    """Which statements of the run at s have values read after it."""
    return [q for q in range(p) if any(u >= s + p for u in uses.get(stmts[s + q].var, ()))]


def _parameters(calls):
    """The helper's parameters: for each place a run reads a value from outside it, the first
    place reading the same value in every call (x read twice is one parameter where every call
    reads one value there). calls: each call's tokens, place by place."""
    first = []
    for i in range(len(calls[0])):
        first.append(next(j for j in range(i + 1) if all(c[j] == c[i] for c in calls)))
    return first


def _best_helper(ctx, stmts, ret):
    defs = _definitions(stmts)
    uses = {}
    for i, s in enumerate(stmts):
        for text in s.texts():
            for t in TOKEN.findall(text):
                uses.setdefault(f"\x01{t}\x01", []).append(i)
    for t in TOKEN.findall(ret):
        uses.setdefault(f"\x01{t}\x01", []).append(len(stmts))
    found, shapes = [], _shapes(stmts)
    detok = ctx.em.detok  # characters as written: the names, not their tokens
    for p in range(2, MAX_HELPER_STATEMENTS + 1):
        windows = {}
        for s in range(len(stmts) - p + 1):
            w = _window(stmts, defs, shapes, s, p)
            if w is not None:
                windows.setdefault(w[0], []).append(s)
        for shape, starts in windows.items():
            if len(starts) < 2 or _periodic([t for t, _ in shape]):
                continue
            chosen = []
            for s in starts:  # not overlapping
                if not chosen or s >= chosen[-1] + p:
                    chosen.append(s)
            if len(chosen) < 2:
                continue
            outs = sorted({q for s in chosen for q in _outputs(stmts, uses, s, p)})
            if not outs:
                continue
            calls = [_window(stmts, defs, shapes, s, p)[1] for s in chosen]
            first = _parameters(calls)
            params = sorted(set(first))
            typed = []  # every call's arguments and results have the same types
            for s, args in zip(chosen, calls):
                typed.append([ctx.type_of(args[i]) for i in params] + [ctx.type_of(stmts[s + q].var) for q in outs])
            types = typed[0]
            if any(t is None for t in types) or any(t != types for t in typed):
                continue
            written = sum(len(detok(stmts[s + q].var)) + len(detok(stmts[s + q].expr)) + 8
                          for s in chosen for q in range(p))
            cost = sum(12 + sum(len(detok(stmts[s + q].var)) + 2 for q in outs) +
                       sum(len(detok(args[i])) + 2 for i in params) for s, args in zip(chosen, calls))
            helper = 30 + 14 * len(params) + sum(len(TOKEN.sub("a0", stmts[chosen[0] + q].expr)) + 12
                                                 for q in range(p))
            saved = written - cost - helper
            if saved > 0:
                found.append((saved, p, chosen, outs, types, first, params))
    return max(found, key=lambda f: f[0])[1:] if found else None


def _periodic(texts):
    """Whether a run is a shorter run repeated, in whole or in part (three alike layers, or two
    and a half: the layer is the helper)."""
    n = len(texts)
    return any(all(texts[i] == texts[i % d] for i in range(n)) for d in range(1, n))


def _apply_helper(ctx, stmts, found, helpers):
    p, chosen, outs, types, first, params = found
    defs, shapes = _definitions(stmts), _shapes(stmts)
    name = ctx.em.detok(ctx.new(f"block{len(helpers) + 1}"))
    param_name = {i: f"a{n}" for n, i in enumerate(params)}
    body, place = [], 0
    s0 = chosen[0]
    for q in range(p):  # the first call's statements, its values named by place
        text, refs = shapes[s0 + q]
        parts = text.split("\x02")
        out = [parts[0]]
        for t, rest in zip(refs, parts[1:]):
            j = defs.get(t)
            if j is not None and s0 <= j < s0 + q:
                out.append(f"v{j - s0}")
            else:
                out.append(param_name[first[place]])
                place += 1
            out.append(rest)
        body.append(Stmt(f"v{q}", "".join(out), stmts[s0 + q].notes))
    out_types = types[len(params):]
    returns = out_types[0] if len(outs) == 1 else "Tuple[" + ", ".join(out_types) + "]"
    signature = ", ".join(f"{param_name[i]}: {t}" for i, t in zip(params, types))
    from kb_emit import wrap
    lines = [wrap(f"def {name}({signature}) -> {returns}:")] + _lines(ctx.em, body, 4, {})
    lines.append("    return " + ", ".join(f"v{q}" for q in outs))
    helpers.append(lines)
    result, i = [], 0
    starts = set(chosen)
    while i < len(stmts):
        if i in starts:
            args = _window(stmts, defs, shapes, i, p)[1]
            var = ", ".join(stmts[i + q].var for q in outs)
            result.append(Stmt(var, f"{name}({', '.join(args[k] for k in params)})"))
            i += p
        else:
            result.append(stmts[i])
            i += 1
    return result
