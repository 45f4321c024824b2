"""The resource keys of Seams' definitions, every one under `seams_`.

A team merges Seams into its own `Definitions` (`dg.Definitions.merge(theirs, seams)`), where a
key is one namespace shared by both: Seams must not take `io_manager` (their assets would be
stored by Seams' IO manager) nor any common name (`postgres`) another project may hold for its
own resource. Every Seams asset names its IO manager (`io_manager_key=IO_MANAGER_KEY`) and asks for
its resources by these keys, so theirs keep theirs.
"""

POSTGRES_KEY = "seams_postgres"
IO_MANAGER_KEY = "seams_io_manager"
EMBEDDER_KEY = "seams_embedder"
"""The packaged model: sizes candidates, and embeds unless the settings name another model."""
STATIC_EMBEDDER_KEY = "seams_static_embedder"
RETRIEVAL_EMBEDDER_KEY = "seams_retrieval_embedder"
"""The model that builds the index and embeds queries (`retrieval.model`, its prompts)."""
BOUNDARY_EMBEDDER_KEY = "seams_boundary_embedder"
"""The model that embeds candidates when `embedder.model` names a model folder."""
