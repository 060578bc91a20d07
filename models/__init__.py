"""Pyomo formulations, one module per problem (build -> model, extract -> plan). Filled by the MILP issues."""
