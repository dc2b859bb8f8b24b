"""The names the command line offers before anything heavy is imported: the ops (also those of the
chain and trajectory reports) and the parallel layouts (and the rule for uneven shards).
``audit.core.ops.OPS`` and ``audit.core.layouts`` hold the same names (a test checks), but import
torch; help texts, the report commands and the first checks of every command must not."""

OP_NAMES = (
    "norm_modulate",
    "gate_residual",
    "gate_residual_norm_modulate",
    "timestep_sinusoid",
    "final_adaln_out",
    "timestep_mlp",
    "adaln_projection",
)
CHAIN_OP = "conditioning_chain"  # the op of an h3_conditioning_chain_replay report: the whole chain
TRAJECTORY_OP = "denoising_trajectory"  # the op of an h3_denoising_trajectory report: the whole loop
LAYOUT_NAMES = ("tp_column", "tp_row", "sp_rows")

UNEVEN_RULE = (  # which splits may be uneven (``audit.core.layouts.split_problem``)
    "uneven shards only along the rows of a row op (sp_rows: torch.tensor_split's shares, the first ranks one row "
    "more); feature splits and a GEMM op's rows need equal shards"
)


def is_count(value: object) -> bool:
    """Whether ``value`` is a count of rows or tokens (a case, a length): an int (not a bool) from 1
    to 2**63 - 1, what an int64 size holds."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**63
