"""The code a full repro file carries besides the judging modules, as real modules.

Each module here runs inside a repro file, in the file's one namespace: it is read and embedded
(``repros.runtime``), never imported by the plugin. The names the renderer writes into each
file (the graph, its inputs, the case's settings) are declared in ``declared.pyi`` for the type
checker; the embedding leaves out that import, the plugin's own imports and the docstrings, and
gathers every module's imports into one block at the head of the file.
"""
