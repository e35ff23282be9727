"""The header of a VCD file, for the power cross-check's scripts."""
import collections


def scope_vars(f, scope):
    """Reads the header of the open VCD file `f` (up to $enddefinitions) and returns the
    variables declared directly in the first scope named `scope`: {id: [(name, width)]}, the
    name with its bit range when it has one (`a[15:0]`, `\\a[0]`)."""
    ids, level, at = collections.defaultdict(list), 0, None
    for line in f:
        t = line.split()
        if not t:
            continue
        if t[0] == "$scope":
            level += 1
            if t[2] == scope and at is None:
                at = level
        elif t[0] == "$upscope":
            if at is not None and level == at:
                at = -1  # closed: a later scope of the same name is another one
            level -= 1
        elif t[0] == "$var" and at is not None and at > 0 and level == at:
            ids[t[3]].append(("".join(t[4:-1]), int(t[2])))
        elif t[0] == "$enddefinitions":
            return ids
    raise SystemExit(f"no $enddefinitions in {f.name}")
