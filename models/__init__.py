"""Pyomo formulations, one module per problem: ``build`` -> model, ``extract`` -> a solution record in numbers,
``warm_start`` <- a plan.  The layer beneath the problem kinds: it imports only optfleet.errors,
optfleet.queueing, optfleet.hardware and itself (tests/test_layers.py)."""
