"""The use cases, one module per area, over a shared `Context`; `CleanAir` is their facade.

Each composes its area's rules with the checks and charges around them (authorization proofs,
credit charges, rate limits), which is why they sit above the areas rather than inside one.
"""
