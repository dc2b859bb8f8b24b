"""The names the command line offers before anything heavy is imported: the ops and the parallel
layouts (and the rule for uneven shards). ``audit.core.ops.OPS`` and ``audit.core.layouts`` hold
the same names (a test checks), but import torch; help texts and the report commands must not."""

OP_NAMES = (
    "norm_modulate",
    "gate_residual",
    "gate_residual_norm_modulate",
    "timestep_sinusoid",
    "final_adaln_out",
    "timestep_mlp",
    "adaln_projection",
)
LAYOUT_NAMES = ("tp_column", "tp_row", "sp_rows")
UNEVEN_RULE = (  # which splits may be uneven (``audit.core.layouts.split_problem``)
    "uneven shards only along the rows of a row op (sp_rows: torch.tensor_split's shares, the first ranks one row "
    "more); feature splits and a GEMM op's rows need equal shards"
)
