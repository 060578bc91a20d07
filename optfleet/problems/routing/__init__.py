"""Token-budget pool routing (kind ``routing``): calibrator, dispatcher, replay and exact views."""
