"""Settings for this repository's own test suite."""

from hypothesis import HealthCheck, settings

# Compiling a graph takes about a second on a CPU: hypothesis' default deadline would flag it.
settings.register_profile(
    "repo", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True,
)
settings.load_profile("repo")
