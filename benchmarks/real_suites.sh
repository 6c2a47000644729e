#!/usr/bin/env bash
# Third-party suites (e3nn, einops) plainly and under --compile-accuracy; see real_suites.py.
exec python3 "$(dirname "$0")/real_suites.py" "$@"
