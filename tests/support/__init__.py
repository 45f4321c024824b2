"""What the tests share besides fixtures: plain functions and constants, imported by name
(`from tests.support.instances import keep_environment`).

Fixtures stay in the `conftest.py` files, which pytest loads itself; a test never imports a
conftest (pytest imports each conftest under its own name, so an import would load a second
copy). Nothing here starts anything at import.

- `databases`: fresh databases on the test server, and reading rows back.
- `instances`: the Dagster instance and definitions of a test's environment.
- `samples`: the sample corpus as folders and batches, other texts, `seams run` in-process.
- `cli`: `seams` as a child process, as a user runs it.
- `processes`: Dagster's webserver and daemon, Redis and `seams worker`s, and stopping them.
- `models`: a stand-in static model in the distiller's format.
- `invariants`: the chunk invariants, checked independently of the product's checks.
- `ast_parse`: `ast.parse` that no other thread or finalizer can disturb on CPython 3.11.
"""
