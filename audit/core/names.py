"""The names the command line offers before anything heavy is imported: the ops and the parallel
layouts. ``audit.core.ops.OPS`` and ``audit.core.layouts`` hold the same names (a test checks),
but import torch; help texts and the report commands must not."""

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
