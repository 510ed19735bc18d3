"""What SGLang serves from a prometheus_client registry: SGLang runs the client in multiprocess
mode (PROMETHEUS_MULTIPROC_DIR), whose collector builds families from the values written so far,
so a labelled family with no child yet has no HELP/TYPE lines at all. The oracle tests replay
operations into a plain in-process registry (exact byte output) and apply this view to it."""


def without_empty_families(text):
    """The exposition text minus families that have no sample lines."""
    out, block = [], []

    def flush():
        if any(not line.startswith("#") for line in block):
            out.extend(block)

    for line in text.splitlines(keepends=True):
        if line.startswith("# HELP "):
            flush()
            block = []
        block.append(line)
    flush()
    return "".join(out)
