"""Request placement across model servers (kind ``placement``): simulator, routing policies, exact views."""
