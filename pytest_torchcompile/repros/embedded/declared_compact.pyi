# A name ``repros.compact.render_compact`` writes into a compact file beside those of
# ``declared.pyi``: declared here for the type checker, which ``embedded.compact`` imports it
# from under TYPE_CHECKING (a test holds it written).
WRITTEN_INPUTS: list[int]
