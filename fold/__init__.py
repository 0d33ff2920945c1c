"""fold: one task's state rebuilt from its events (fold), the projections kept in the store
(projection, catch_up), the contract profiles and the views of a projected task."""
