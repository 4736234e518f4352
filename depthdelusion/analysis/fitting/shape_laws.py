"""The names of `depthdelusion shape`'s pooling laws and what each shares: their one owner, free
of numpy and scipy so that the command's `--help` (``options.SHAPE_LAWS``) reads them without
loading the fitting stack. ``shape_pool`` fits them."""

LAWS = {
    "bowl": "per suite E, A, α, B, β; shared bowl a·(u − c)² in u = ln(D/W) and shared ε",
    "chinchilla": "per suite E, A, α, B, β; no shape term; shared ε",
    "kink": "per suite E, A, α, B, β; shared kink λ·max(0, D − κ·ln W)·W^−γ (the paper's Eq. 6) and shared ε",
    "kink_relative": "per suite E, A, α, B, β; shared kink λ·max(0, D − D_crit)/D_crit·W^−γ, D_crit = κ·ln W "
                     "(the paper's Eq. 6, relative form) and shared ε",
    "separate": "every suite fitted alone: its own E, A, α, B, β, bowl and ε",
    "shared": "one E, A, α, B, β, bowl and ε for every suite (losses taken as comparable)",
    "inverse_depth": "Liu et al. 2026's E + Aw·W^−aw + Ad·D^−ad + B·T^−β: per suite E, B, β; shared "
                     "width and depth terms; no N term (ε does not enter)",
}
#: The laws whose shape term is the paper's critical-depth penalty (λ, κ, γ).
KINK_LAWS = ("kink", "kink_relative")
#: The laws without a parameter-count term A·N^−α: ε does not act on them.
NO_N_TERM = ("inverse_depth",)
